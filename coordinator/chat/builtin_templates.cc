#include "coordinator/chat/builtin_templates.h"

namespace tpserve {
namespace {

// llama.cpp's LLM_CHAT_TEMPLATE_GEMMA (src/llama-chat.cpp), in Jinja.
constexpr std::string_view kGemma = R"({{- bos_token -}}
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
  {%- if message['role'] == 'system' -%}
    {%- set ns.system = ns.system + (message['content'] | trim) -%}
  {%- else -%}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
    {{- '<start_of_turn>' + role + '\n' -}}
    {%- if ns.system != '' and role != 'model' -%}
      {{- ns.system + '\n\n' -}}
      {%- set ns.system = '' -%}
    {%- endif -%}
    {{- (message['content'] | trim) + '<end_of_turn>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%}
)";

}  // namespace

std::optional<std::string_view> BuiltinChatTemplate(std::string_view format) {
  if (format == "gemma") return kGemma;
  return std::nullopt;
}

}  // namespace tpserve
