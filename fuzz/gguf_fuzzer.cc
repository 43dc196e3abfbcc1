// libFuzzer target: GGUF parsing (formats/gguf.h) over an in-memory byte source. Every file
// Open accepts must also be safe to use: each tensor is looked up and its first and last byte
// read, the metadata the model and the tokenizer read is fetched, and the model config is
// derived, so a bound that Open forgot to check shows up under ASan.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "formats/byte_source.h"
#include "formats/gguf.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto source = std::make_unique<tpserve::MemoryByteSource>(
      "fuzz.gguf", std::string(reinterpret_cast<const char*>(data), size));
  auto gguf = tpserve::GgufFile::FromSource(std::move(source));
  if (!gguf.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : (*gguf)->TensorNames()) {
    auto view = (*gguf)->Find(name);
    if (!view.ok() || view->nbytes == 0) continue;
    sink = sink ^ view->data[0] ^ view->data[view->nbytes - 1];
  }
  (void)(*gguf)->GetString("general.architecture");
  (void)(*gguf)->GetStringArray("tokenizer.ggml.tokens");
  (void)(*gguf)->GetF32Array("tokenizer.ggml.scores");
  (void)(*gguf)->GetI32Array("tokenizer.ggml.token_type");
  (void)tpserve::ModelSpecFromGguf(**gguf);
  return 0;
}
