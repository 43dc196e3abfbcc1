// libFuzzer target: the HTTP/JSON front door (coordinator/http/openai_api.h). The first byte
// picks /v1/chat/completions or /v1/completions, the rest is the request body. An accepted
// body's proto then goes through the same door as a gRPC request (ValidateGenerateRequest),
// and a refusal through the error rewriting the server applies (ToClientFieldNames).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "coordinator/http/openai_api.h"
#include "coordinator/validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const tpserve::Endpoint endpoint =
      data[0] & 1 ? tpserve::Endpoint::kCompletions : tpserve::Endpoint::kChatCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto request = tpserve::ParseOpenAiRequest(endpoint, body, "smollm2");
  if (!request.ok()) return 0;
  tpserve::ModelLimits limits;
  limits.vocab_size = 49152;
  limits.context_length = 2048;
  auto input = tpserve::ValidateGenerateRequest(request->proto, limits);
  if (!input.ok()) (void)tpserve::ToClientFieldNames(input.status(), *request);
  return 0;
}
