// A checkpoint split over several safetensors files, tied together by an index
// (model.safetensors.index.json):
//   {"metadata": {"total_size": 16060522496},
//    "weight_map": {"model.embed_tokens.weight": "model-00001-of-00004.safetensors", ...}}
// Shard file names are relative to the index's directory. Each shard is opened (mmapped) once.
//
//   TP_ASSIGN_OR_RETURN(auto st, ShardedSafetensors::Open(dir + "/model.safetensors.index.json"));
//   TP_ASSIGN_OR_RETURN(TensorView w, st->Find("lm_head.weight"));
//
// Open() refuses, naming the index, the tensor and the shard: invalid JSON or duplicate keys,
// a missing or empty weight_map, a shard path that is absolute or climbs with "..", a shard
// that cannot be opened (its status code is kept, e.g. NOT_FOUND) or is itself invalid, a
// tensor listed for a shard that lacks it, a tensor present in two shards, and a tensor in a
// shard that the index does not list.
// Thread-safety: immutable after Open; all methods are const and safe to call concurrently.
#ifndef TPSERVE_FORMATS_SAFETENSORS_SHARDED_H_
#define TPSERVE_FORMATS_SAFETENSORS_SHARDED_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/byte_source.h"
#include "formats/safetensors.h"

namespace tpserve {

class ShardedSafetensors final : public WeightSource {
 public:
  // Produces the bytes of a shard given its name as written in weight_map.
  using ShardOpener =
      std::function<absl::StatusOr<std::unique_ptr<ByteSource>>(const std::string& shard_file)>;

  static absl::StatusOr<std::unique_ptr<ShardedSafetensors>> Open(const std::string& index_path);
  // `index_name` labels errors; tests pass an in-memory opener.
  static absl::StatusOr<std::unique_ptr<ShardedSafetensors>> FromIndex(
      std::string_view index_json, const std::string& index_name, const ShardOpener& open_shard);

  // Distinct shard files, sorted.
  std::vector<std::string> shard_files() const;

  CheckpointFormat format() const override { return CheckpointFormat::kSafetensors; }
  absl::StatusOr<TensorView> Find(std::string_view name) const override;
  // Sorted by name.
  std::vector<std::string> TensorNames() const override;
  std::string Describe() const override;

 private:
  explicit ShardedSafetensors(std::string index_name) : index_name_(std::move(index_name)) {}

  absl::Status OpenShards(const std::map<std::string, std::string>& weight_map,
                          const ShardOpener& open_shard);
  absl::Status CheckShardContents(const std::map<std::string, std::string>& weight_map) const;

  std::string index_name_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;  // by file name
  // tensor name -> its shard (owned by shards_)
  std::map<std::string, const SafetensorsFile*, std::less<>> tensor_to_shard_;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_SAFETENSORS_SHARDED_H_
