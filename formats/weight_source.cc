// OpenWeightSource: picks the reader for a path by content first (the GGUF magic), then by
// name, then by the shape of a safetensors header.
#include "formats/weight_source.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "formats/byte_source.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/safetensors_sharded.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

namespace fs = std::filesystem;

constexpr char kIndexName[] = "model.safetensors.index.json";
constexpr char kSingleName[] = "model.safetensors";

bool HasGgufMagic(absl::Span<const uint8_t> bytes) {
  return bytes.size() >= 4 && bytes[0] == 'G' && bytes[1] == 'G' && bytes[2] == 'U' &&
         bytes[3] == 'F';
}

// A safetensors file opens with a u64 header length and then '{' (maybe after spaces).
bool LooksLikeSafetensors(absl::Span<const uint8_t> bytes) {
  return bytes.size() >= 9 && bytes[8] == '{';
}

// Picks the checkpoint inside a directory: a sharded index, a single model.safetensors, or
// the only .gguf file.
absl::StatusOr<std::string> PickFileInDirectory(const std::string& dir) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / kIndexName, ec))
    return (fs::path(dir) / kIndexName).string();
  if (fs::is_regular_file(fs::path(dir) / kSingleName, ec))
    return (fs::path(dir) / kSingleName).string();
  std::vector<std::string> ggufs;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".gguf" && it->is_regular_file(ec)) {
      ggufs.push_back(it->path().string());
    }
  }
  if (ec) return absl::ErrnoToStatus(ec.value(), StrCat("listing directory ", dir));
  if (ggufs.size() == 1) return ggufs.front();
  if (ggufs.empty()) {
    return absl::NotFoundError(
        StrCat("no ", kIndexName, ", ", kSingleName, " or .gguf file in ", dir));
  }
  std::sort(ggufs.begin(), ggufs.end());
  return absl::InvalidArgumentError(StrCat(ggufs.size(), " .gguf files in ", dir, " (",
                                           absl::StrJoin(ggufs, ", "), "); pass one of them"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    TP_ASSIGN_OR_RETURN(std::string file, PickFileInDirectory(path));
    return OpenWeightSource(file);
  }
  if (absl::EndsWith(path, ".index.json")) {
    TP_ASSIGN_OR_RETURN(std::unique_ptr<ShardedSafetensors> sharded,
                        ShardedSafetensors::Open(path));
    return std::unique_ptr<WeightSource>(std::move(sharded));
  }
  TP_ASSIGN_OR_RETURN(std::unique_ptr<MmapByteSource> source, MmapByteSource::Open(path));
  const absl::Span<const uint8_t> bytes = source->bytes();
  if (HasGgufMagic(bytes)) {
    TP_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::FromSource(std::move(source)));
    return std::unique_ptr<WeightSource>(std::move(gguf));
  }
  if (absl::EndsWith(path, ".safetensors") || LooksLikeSafetensors(bytes)) {
    TP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> st,
                        SafetensorsFile::FromSource(std::move(source)));
    return std::unique_ptr<WeightSource>(std::move(st));
  }
  return absl::InvalidArgumentError(StrCat(
      "cannot tell the checkpoint format of ", path,
      ": no GGUF magic, not named *.safetensors or *.index.json, and no safetensors header"));
}

}  // namespace tpserve
