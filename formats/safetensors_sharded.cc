#include "formats/safetensors_sharded.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "formats/json_strict.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;
using WeightMap = std::map<std::string, std::string>;  // tensor name -> shard file

// Shard names come from an untrusted file; they must name something beside the index.
bool EscapesDirectory(const std::string& shard) {
  if (shard.empty() || shard.front() == '/') return true;
  for (absl::string_view part : absl::StrSplit(shard, '/')) {
    if (part == "..") return true;
  }
  return false;
}

absl::StatusOr<WeightMap> ParseWeightMap(std::string_view index_json,
                                         const std::string& index_name) {
  TP_ASSIGN_OR_RETURN(Json index, ParseJsonStrict(index_json, index_name));
  auto invalid = [&](const std::string& message) {
    return absl::InvalidArgumentError(StrCat(index_name, ": ", message));
  };
  if (!index.is_object()) return invalid("the index is not a JSON object");
  auto it = index.find("weight_map");
  if (it == index.end() || !it->is_object())
    return invalid("'weight_map' is missing or not an object");
  if (it->empty()) return invalid("'weight_map' is empty");
  WeightMap weight_map;
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string())
      return invalid(StrCat("weight_map entry for tensor '", tensor, "' is not a string"));
    const std::string file = shard.get<std::string>();
    if (EscapesDirectory(file)) {
      return invalid(StrCat("shard path '", file, "' for tensor '", tensor,
                            "' must be relative and stay inside the index directory"));
    }
    weight_map.emplace(tensor, file);
  }
  return weight_map;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardedSafetensors>> ShardedSafetensors::Open(
    const std::string& index_path) {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<MmapByteSource> index, MmapByteSource::Open(index_path));
  absl::Span<const uint8_t> bytes = index->bytes();
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::string dir = std::filesystem::path(index_path).parent_path().string();
  auto open_shard = [&dir](const std::string& file) -> absl::StatusOr<std::unique_ptr<ByteSource>> {
    TP_ASSIGN_OR_RETURN(std::unique_ptr<MmapByteSource> shard,
                        MmapByteSource::Open(dir.empty() ? file : StrCat(dir, "/", file)));
    return std::unique_ptr<ByteSource>(std::move(shard));
  };
  return FromIndex(text, index_path, open_shard);
}

absl::StatusOr<std::unique_ptr<ShardedSafetensors>> ShardedSafetensors::FromIndex(
    std::string_view index_json, const std::string& index_name, const ShardOpener& open_shard) {
  TP_ASSIGN_OR_RETURN(WeightMap weight_map, ParseWeightMap(index_json, index_name));
  std::unique_ptr<ShardedSafetensors> sharded(new ShardedSafetensors(index_name));
  TP_RETURN_IF_ERROR(sharded->OpenShards(weight_map, open_shard));
  TP_RETURN_IF_ERROR(sharded->CheckShardContents(weight_map));
  for (const auto& [tensor, file] : weight_map) {
    sharded->tensor_to_shard_.emplace(tensor, sharded->shards_.at(file).get());
  }
  return sharded;
}

absl::Status ShardedSafetensors::OpenShards(const WeightMap& weight_map,
                                            const ShardOpener& open_shard) {
  for (const auto& [tensor, file] : weight_map) {
    if (shards_.contains(file)) continue;
    absl::StatusOr<std::unique_ptr<ByteSource>> source = open_shard(file);
    if (!source.ok()) {
      // Keep the code (NOT_FOUND for a missing file) and say which entry wanted it.
      return absl::Status(source.status().code(),
                          StrCat(index_name_, ": cannot open shard '", file, "' (for tensor '",
                                 tensor, "'): ", source.status().message()));
    }
    TP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> shard,
                        SafetensorsFile::FromSource(std::move(*source)));
    shards_.emplace(file, std::move(shard));
  }
  return absl::OkStatus();
}

absl::Status ShardedSafetensors::CheckShardContents(const WeightMap& weight_map) const {
  std::map<std::string, std::string> owner;  // tensor -> the shard file holding it
  for (const auto& [file, shard] : shards_) {
    for (const SafetensorsTensorInfo& t : shard->tensor_infos()) {
      auto [it, inserted] = owner.emplace(t.name, file);
      if (!inserted) {
        return absl::InvalidArgumentError(StrCat(index_name_, ": tensor '", t.name,
                                                 "' appears in both shard '", it->second,
                                                 "' and shard '", file, "'"));
      }
    }
  }
  for (const auto& [tensor, file] : weight_map) {
    if (!shards_.at(file)->HasTensor(tensor)) {
      return absl::InvalidArgumentError(StrCat(index_name_, ": tensor '", tensor,
                                               "' is listed for shard '", file,
                                               "' but is absent from it"));
    }
  }
  for (const auto& [tensor, file] : owner) {
    if (!weight_map.contains(tensor)) {
      return absl::InvalidArgumentError(StrCat(index_name_, ": tensor '", tensor, "' in shard '",
                                               file, "' is not listed in weight_map"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ShardedSafetensors::shard_files() const {
  std::vector<std::string> files;
  for (const auto& [file, shard] : shards_) files.push_back(file);
  return files;
}

absl::StatusOr<TensorView> ShardedSafetensors::Find(std::string_view name) const {
  auto it = tensor_to_shard_.find(name);
  if (it == tensor_to_shard_.end()) {
    return absl::NotFoundError(StrCat("tensor '", name, "' not found in ", index_name_));
  }
  return it->second->Find(name);
}

std::vector<std::string> ShardedSafetensors::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensor_to_shard_.size());
  for (const auto& [name, shard] : tensor_to_shard_) names.push_back(name);
  return names;
}

std::string ShardedSafetensors::Describe() const {
  return StrCat(index_name_, " (", shards_.size(), " shards)");
}

}  // namespace tpserve
