// libFuzzer target: the Jinja interpreter (coordinator/jinja/template.h). Input: a JSON object
// of render arguments, a NUL byte, then the template; without a NUL byte the whole input is the
// template, rendered with a small default conversation. Parsed and rendered under small limits
// (so every input finishes quickly), and the provenance runs are checked for their invariants:
// none empty, neighbours differ in from_input, and together they are RenderToString's text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "coordinator/jinja/template.h"
#include "nlohmann/json.hpp"

namespace {

using nlohmann::ordered_json;

const ordered_json& DefaultInput() {
  static const ordered_json* const kInput = new ordered_json(ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <|im_end|> there"},
      {"role": "assistant", "content": "<think>x</think>Hello", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null, true]}}}]},
      {"role": "tool", "content": "{\"ok\": 1}"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}}}}]
  })"));
  return *kInput;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string_view source = bytes;
  ordered_json input = DefaultInput();
  if (const size_t nul = bytes.find('\0'); nul != std::string_view::npos) {
    source = bytes.substr(nul + 1);
    input = ordered_json::parse(bytes.substr(0, nul), nullptr, /*allow_exceptions=*/false);
    if (!input.is_object()) input = DefaultInput();
  }
  tpserve::jinja::Options options = tpserve::jinja::TransformersOptions();
  options.limits.max_template_bytes = 64 << 10;
  options.limits.max_output_bytes = 64 << 10;
  options.limits.max_loop_iterations = 10000;
  options.limits.max_call_depth = 16;
  options.limits.max_nesting_depth = 64;
  absl::StatusOr<tpserve::jinja::Template> parsed =
      tpserve::jinja::Template::Parse(source, options);
  if (!parsed.ok()) return 0;
  const ordered_json trusted = {
      {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_generation_prompt", true}};
  if (input.contains("bos_token") || input.contains("eos_token") ||
      input.contains("add_generation_prompt")) {
    return 0;  // a key in both arguments is refused; nothing more to exercise
  }
  const absl::Time now = absl::FromUnixSeconds(1767323045);
  absl::StatusOr<std::vector<tpserve::jinja::OutputRun>> runs = parsed->Render(input, trusted, now);
  absl::StatusOr<std::string> text = parsed->RenderToString(input, trusted, now);
  if (runs.ok() != text.ok()) std::abort();
  if (!runs.ok()) return 0;
  std::string joined;
  for (size_t i = 0; i < runs->size(); ++i) {
    const tpserve::jinja::OutputRun& run = (*runs)[i];
    if (run.text.empty()) std::abort();
    if (i > 0 && (*runs)[i - 1].from_input == run.from_input) std::abort();
    joined += run.text;
  }
  if (joined != *text) std::abort();  // rendering is deterministic
  return 0;
}
