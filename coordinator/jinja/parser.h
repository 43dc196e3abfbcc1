// The Jinja parser: tokens -> the tree of ast.h, a line-by-line port of jinja2.parser.Parser
// (same grammar, precedence and error messages) plus the compile-time checks jinja2 makes
// (unknown filters and tests, break outside a loop, assigning to `loop`).
//
//   TP_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, ParseProgram(source, options));
//
// Threading: pure function.
#ifndef TPSERVE_COORDINATOR_JINJA_PARSER_H_
#define TPSERVE_COORDINATOR_JINJA_PARSER_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/jinja/ast.h"

namespace tpserve::jinja {

// INVALID_ARGUMENT "line L, column C: <what>" for anything jinja2 would refuse to compile,
// for constructs this interpreter cannot run (extends, include, import, autoescape), and for
// a template over max_template_bytes or nested deeper than max_nesting_depth.
absl::StatusOr<std::shared_ptr<const Program>> ParseProgram(std::string_view source,
                                                            const Options& options);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_PARSER_H_
