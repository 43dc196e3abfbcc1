// libFuzzer target: quantized checkpoints (checkpoint/quant_scheme.h, checkpoint/stored_matrix.h)
// as the engine reads them: the `quantization_config` of a config.json, then one linear
// weight's tensors (FP8 with channel or block scales, AWQ or GPTQ int4 groups, g_idx) out of a
// safetensors file, checked against a [rows, cols] shape and read whole, by halves of rows
// (column parallel) and by halves of columns (row parallel).
//
// Input: bytes 0-1 the config's length L (little endian), byte 2 rows / 8, byte 3 cols / 8,
// then L bytes of config.json, then the safetensors file. Every module the file holds tensors
// of is opened. Seeds: fuzz/make_quant_seeds.py cuts one module out of each fixture in
// tests/golden/quant.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "checkpoint/quant_scheme.h"
#include "checkpoint/stored_matrix.h"
#include "formats/byte_source.h"
#include "formats/safetensors.h"
#include "model/sharding.h"

namespace {

void ReadSlice(const tpserve::StoredMatrix& matrix, const tpserve::TensorSlice& slice) {
  absl::StatusOr<tpserve::HostMatrix> read = matrix.Read(slice);
  (void)read;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const size_t config_size = data[0] | (size_t{data[1]} << 8);
  const int64_t rows = 8 * int64_t{data[2] == 0 ? 1 : data[2]};
  const int64_t cols = 8 * int64_t{data[3] == 0 ? 1 : data[3]};
  if (size - 4 < config_size) return 0;
  const std::string_view config(reinterpret_cast<const char*>(data) + 4, config_size);
  absl::StatusOr<tpserve::QuantScheme> scheme = tpserve::ParseQuantizationConfig(config);
  if (!scheme.ok()) return 0;

  const std::string file(reinterpret_cast<const char*>(data) + 4 + config_size,
                         size - 4 - config_size);
  auto st = tpserve::SafetensorsFile::FromSource(
      std::make_unique<tpserve::MemoryByteSource>("fuzz.safetensors", file));
  if (!st.ok()) return 0;

  std::set<std::string> modules;
  for (const std::string& name : (*st)->TensorNames()) {
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos) modules.insert(name.substr(0, dot));
    if (modules.size() == 8) break;
  }
  for (const std::string& module : modules) {
    tpserve::TensorUse used;
    absl::StatusOr<tpserve::StoredMatrix> matrix =
        tpserve::StoredMatrix::Open(**st, *scheme, module, rows, cols, &used);
    if (!matrix.ok()) continue;
    ReadSlice(*matrix, {0, rows, 0, cols});
    ReadSlice(*matrix, {rows / 2, rows - rows / 2, 0, cols});
    ReadSlice(*matrix, {0, rows, cols / 2, cols - cols / 2});
  }
  return 0;
}
