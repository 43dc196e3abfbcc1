// libFuzzer target: one safetensors file (formats/safetensors.h) over an in-memory byte source.
// Every tensor of an accepted file is looked up and its first and last byte read, so an offset
// Open forgot to check shows up under ASan.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "formats/byte_source.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto source = std::make_unique<tpserve::MemoryByteSource>(
      "fuzz.safetensors", std::string(reinterpret_cast<const char*>(data), size));
  auto st = tpserve::SafetensorsFile::FromSource(std::move(source));
  if (!st.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : (*st)->TensorNames()) {
    auto view = (*st)->Find(name);
    if (!view.ok() || view->nbytes == 0) continue;
    sink = sink ^ view->data[0] ^ view->data[view->nbytes - 1];
  }
  return 0;
}
