// XGrammar's log hooks (it is built with XGRAMMAR_LOG_CUSTOMIZE=1, tools/xgrammar.BUILD): its
// fatal errors become exceptions we catch at the compiler's boundary, and its warnings, which
// are how it says that it is ignoring part of a schema ("falling back to anyOf semantics",
// "ignoring minLength/maxLength"), are collected on the compiling thread instead of being
// printed, so that the compiler can refuse (strict) or report (not strict) what would not be
// enforced.
//
//   XGrammarWarningCapture capture;   // on this thread, until it goes out of scope
//   compiler.CompileJSONSchema(...);
//   for (const std::string& w : capture.warnings()) ...
#ifndef TPSERVE_COORDINATOR_STRUCTURED_XGRAMMAR_LOG_H_
#define TPSERVE_COORDINATOR_STRUCTURED_XGRAMMAR_LOG_H_

#include <stdexcept>
#include <string>
#include <vector>

namespace tpserve {

// What XGrammar's fatal log throws (its message, without file and line).
class XGrammarFatalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class XGrammarWarningCapture {
 public:
  XGrammarWarningCapture();
  ~XGrammarWarningCapture();
  XGrammarWarningCapture(const XGrammarWarningCapture&) = delete;
  XGrammarWarningCapture& operator=(const XGrammarWarningCapture&) = delete;

  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<std::string> warnings_;
  std::vector<std::string>* previous_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_XGRAMMAR_LOG_H_
