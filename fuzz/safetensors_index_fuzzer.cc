// libFuzzer target: the sharded checkpoint index (model.safetensors.index.json,
// formats/safetensors_sharded.h). The input is the index text; every shard it names opens as
// the same small valid file holding tensors "x" (F32 [2]) and "y" (F32 [1]), so the fuzzer
// explores the index (weight_map, metadata, names that are or are not in the shards).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "formats/byte_source.h"
#include "formats/safetensors_sharded.h"

namespace {

// {"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{...[8,12]}} + 12 data bytes.
std::string ShardBytes() {
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("y":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes + header + std::string(12, '\x01');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string* const kShard = new std::string(ShardBytes());
  const std::string index(reinterpret_cast<const char*>(data), size);
  auto opener = [](const std::string& name)
      -> absl::StatusOr<std::unique_ptr<tpserve::ByteSource>> {
    return std::unique_ptr<tpserve::ByteSource>(
        std::make_unique<tpserve::MemoryByteSource>(name, *kShard));
  };
  auto st = tpserve::ShardedSafetensors::FromIndex(index, "fuzz.index.json", opener);
  if (!st.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : (*st)->TensorNames()) {
    auto view = (*st)->Find(name);
    if (!view.ok() || view->nbytes == 0) continue;
    sink = sink ^ view->data[0] ^ view->data[view->nbytes - 1];
  }
  return 0;
}
