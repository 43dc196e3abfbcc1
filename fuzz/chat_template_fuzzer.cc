// libFuzzer target: chat templates (coordinator/chat/chat_template.h) over fuzzed requests.
// The first byte picks the template: one of three built-in shapes (ChatML, Llama 3 with tools,
// a Hermes-style tool template) or a Jinja text taken from the input; the rest becomes a chat
// (roles, contents, tool calls with fuzzed arguments, tool results, tools, template kwargs)
// that is rendered under small limits with and without the generation prompt.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "coordinator/chat/chat_template.h"
#include "proto/tpserve.pb.h"

namespace {

constexpr const char* kTemplates[] = {
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "{{ bos_token }}{% if tools %}{{ tools | tojson(indent=4) }}{% endif %}{% for m in messages %}"
    "<|start_header_id|>{{ m.role }}<|end_header_id|>\\n\\n{% if m.tool_calls %}{% for c in "
    "m.tool_calls %}{\"name\": \"{{ c.function.name }}\", \"parameters\": {{ c.function.arguments "
    "| tojson }}}{% endfor %}{% else %}{{ m.content | trim }}{% endif %}<|eot_id|>{% endfor %}",
    "{% for m in messages %}{% if m.role == 'tool' %}<tool_response>{{ m.content }}</tool_response>"
    "{% elif m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}"
    "</tool_call>{% endfor %}{% else %}{{ m.role }}: {{ m.content }}{% endif %}\\n{% endfor %}",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  const int pick = input.ConsumeIntegralInRange<int>(0, 3);
  const std::string source =
      pick < 3 ? std::string(kTemplates[pick]) : input.ConsumeRandomLengthString(4096);
  tpserve::ChatTemplateOptions options;
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_loop_iterations = 1 << 14;
  options.limits.max_call_depth = 16;
  absl::StatusOr<tpserve::ChatTemplate> chat = tpserve::ChatTemplate::Create(
      source, tpserve::ChatTemplateTokens{"<s>", "</s>", "", ""}, options);
  if (!chat.ok()) return 0;
  static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
  tpserve::v1::Chat request;
  while (input.remaining_bytes() > 0 && request.messages_size() < 32) {
    tpserve::v1::ChatMessage* m = request.add_messages();
    m->set_role(input.ConsumeBool() ? std::string(kRoles[input.ConsumeIntegralInRange<int>(0, 3)])
                                    : input.ConsumeRandomLengthString(16));
    m->set_content(input.ConsumeRandomLengthString(512));
    if (input.ConsumeBool()) {
      tpserve::v1::ToolCall* call = m->add_tool_calls();
      call->set_id(input.ConsumeRandomLengthString(16));
      call->set_name(input.ConsumeRandomLengthString(16));
      call->set_arguments(input.ConsumeRandomLengthString(128));
    }
    if (input.ConsumeIntegralInRange<int>(0, 7) == 0) {
      tpserve::v1::Tool* tool = request.add_tools();
      tool->set_name(input.ConsumeRandomLengthString(16));
      tool->set_parameters(input.ConsumeRandomLengthString(128));
    }
    if (input.ConsumeIntegralInRange<int>(0, 15) == 0) {
      request.set_template_kwargs(input.ConsumeRandomLengthString(64));
    }
  }
  for (bool add_generation_prompt : {false, true}) {
    request.set_add_generation_prompt(add_generation_prompt);
    absl::StatusOr<tpserve::RenderedPrompt> prompt = chat->Render(request);
    if (prompt.ok()) (void)prompt->Text();
  }
  return 0;
}
