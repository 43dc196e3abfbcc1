// libFuzzer target: a Hugging Face tokenizer.json (coordinator/tokenizer/hf_tokenizer_json.h).
// A file that parses is also built into a Tokenizer, which encodes and decodes a fixed text
// (specials, digits, non-ASCII) so that vocabularies the adapter accepts are exercised too.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "coordinator/tokenizer/hf_tokenizer_json.h"
#include "coordinator/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = tpserve::TokenizerDataFromHfJson(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;
  auto tokenizer = tpserve::Tokenizer::Create(std::move(*parsed));
  if (!tokenizer.ok()) return 0;
  auto ids = tokenizer->Encode("Hello, world 1234 <|im_end|> caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd");
  if (ids.ok()) (void)tokenizer->Decode(*ids);
  return 0;
}
