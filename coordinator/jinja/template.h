// Jinja2 chat templates: a self-contained interpreter that renders Hugging Face chat templates
// byte for byte as Python jinja2 3.1 does in the environment transformers builds
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, {% generation %},
// transformers' tojson, raise_exception and strftime_now), and tells which bytes of the result
// came from user input, so that a user who types "<|im_end|>" cannot forge a special token.
//
//   TP_ASSIGN_OR_RETURN(jinja::Template chat, jinja::Template::Parse(tokenizer_config_template));
//   TP_ASSIGN_OR_RETURN(std::vector<jinja::OutputRun> runs,
//                       chat.Render({{"messages", messages}}, {{"add_generation_prompt", true}},
//                                   absl::Now()));
//
// What is supported and where it differs from jinja2: coordinator/jinja/README.md.
//
// Threading: a Template is immutable after Parse; copies share the parsed tree, and Render may
// run on many threads at once.
#ifndef TPSERVE_COORDINATOR_JINJA_TEMPLATE_H_
#define TPSERVE_COORDINATOR_JINJA_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tpserve::jinja {

// Bounds on what one template may cost. A limit hit is RESOURCE_EXHAUSTED naming the limit and
// its value, e.g. "max_output_bytes (8388608)".
struct Limits {
  int64_t max_template_bytes = 1 << 20;
  int64_t max_output_bytes = 8 << 20;     // the rendered text, and any one string value
  int64_t max_loop_iterations = 1 << 20;  // all loop iterations of one render together, plus
                                          // the elements built or visited by filters and lists
  int32_t max_call_depth = 64;            // nested macro calls / call blocks / recursion
  int32_t max_nesting_depth = 128;        // parser: nested blocks/expressions
};

struct Options {  // TransformersOptions() is what transformers uses
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
  Limits limits;
};

Options TransformersOptions();

// One run of rendered output. from_input: these bytes came (possibly through filters, slicing or
// concatenation) from a string of the `input` argument of Render; false: from the template's own
// text or from `trusted`. Transformations that cannot keep exact byte ranges (upper, replace,
// tojson, format, ...) mark their whole result as from_input when any input byte went in.
struct OutputRun {
  std::string text;
  bool from_input;
  bool operator==(const OutputRun&) const = default;
};

struct Program;  // the parsed tree (ast.h); immutable, shared by copies of a Template

class Template {
 public:
  // INVALID_ARGUMENT "line L, column C: <what>" for a syntax error, an unknown filter or test
  // name, an unknown or unsupported statement/tag (extends, include, import...), or the source
  // over limits (naming max_template_bytes or max_nesting_depth and its value). Everything
  // that can be checked before running is checked here, never at the first Render.
  static absl::StatusOr<Template> Parse(std::string_view source,
                                        const Options& options = TransformersOptions());

  // `input`: values from users (messages, tools, documents...). `trusted`: values the server
  // sets (bos_token, eos_token, add_generation_prompt, ...). Both must be JSON objects (null is
  // taken as {}); their keys become template globals (a key in both: INVALID_ARGUMENT). `now` is
  // what strftime_now formats (in UTC).
  // Errors: INVALID_ARGUMENT "line L, column C: ..." for runtime errors (type errors, undefined
  // attribute access, raise_exception("msg") with the message verbatim), RESOURCE_EXHAUSTED
  // naming the limit and its value for a limit hit.
  // No run is empty and adjacent runs differ in from_input (an empty rendering has no runs).
  absl::StatusOr<std::vector<OutputRun>> Render(const nlohmann::ordered_json& input,
                                                const nlohmann::ordered_json& trusted,
                                                absl::Time now) const;
  // The runs of Render joined.
  absl::StatusOr<std::string> RenderToString(const nlohmann::ordered_json& input,
                                             const nlohmann::ordered_json& trusted,
                                             absl::Time now) const;

  const Options& options() const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

  std::shared_ptr<const Program> program_;
};

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_TEMPLATE_H_
