// libFuzzer target: a Hugging Face config.json (model/config.h, ModelSpecFromHfJson).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tpserve::ModelSpecFromHfJson(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
