// libFuzzer target: the gRPC door (coordinator/validation.h). The input is the wire bytes of a
// tpserve.v1.GenerateRequest: ParseRequestBytes, then ValidateGenerateRequest with limits like
// the served SmolLM2's, then the context-window check on an accepted request.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "coordinator/validation.h"
#include "proto/tpserve.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpserve::v1::GenerateRequest request;
  if (!tpserve::ParseRequestBytes(std::string_view(reinterpret_cast<const char*>(data), size),
                                  &request)
           .ok()) {
    return 0;
  }
  tpserve::ModelLimits limits;
  limits.vocab_size = 49152;
  limits.context_length = 2048;
  auto input = tpserve::ValidateGenerateRequest(request, limits);
  if (!input.ok()) return 0;
  const int64_t prompt_tokens =
      input->kind == tpserve::ValidatedInput::Kind::kTokenIds
          ? static_cast<int64_t>(input->token_ids.size())
          : static_cast<int64_t>(input->text.size());
  (void)tpserve::CheckContextWindow(prompt_tokens, input->max_new_tokens, limits);
  return 0;
}
