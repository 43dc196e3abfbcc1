// libFuzzer target: chat templates (coordinator/tokenizer/chat_template.h). The first byte
// picks the template: a named one, or FromJinja over a template text taken from the input;
// the rest becomes a conversation (roles and contents from the input, unknown roles included)
// that is rendered with and without the generation prompt.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  static const char* const kNames[] = {"chatml", "smollm2", "llama3", "jinja"};
  const std::string name = kNames[input.ConsumeIntegralInRange<int>(0, 3)];
  auto chat = name == "jinja"
                  ? tpserve::ChatTemplate::FromJinja(input.ConsumeRandomLengthString(4096))
                  : tpserve::ChatTemplate::FromName(name);
  if (!chat.ok()) return 0;
  static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
  std::vector<tpserve::ChatMessage> messages;
  while (input.remaining_bytes() > 0 && messages.size() < 64) {
    tpserve::ChatMessage message;
    message.role = input.ConsumeBool() ? std::string(kRoles[input.ConsumeIntegralInRange<int>(0, 3)])
                                       : input.ConsumeRandomLengthString(16);
    message.content = input.ConsumeRandomLengthString(1024);
    messages.push_back(std::move(message));
  }
  for (bool add_generation_prompt : {false, true}) {
    auto segments = chat->Render(messages, add_generation_prompt);
    if (segments.ok()) (void)tpserve::SegmentsToText(*segments);
  }
  return 0;
}
