#include "coordinator/structured/xgrammar_log.h"

#include <iostream>

namespace tpserve {
namespace {

thread_local std::vector<std::string>* g_sink = nullptr;

}  // namespace

XGrammarWarningCapture::XGrammarWarningCapture() : previous_(g_sink) { g_sink = &warnings_; }
XGrammarWarningCapture::~XGrammarWarningCapture() { g_sink = previous_; }

}  // namespace tpserve

// The hooks XGrammar's support/logging.h declares when XGRAMMAR_LOG_CUSTOMIZE is 1.
namespace xgrammar {

[[noreturn]] void LogFatalImpl(const std::string& file, int lineno, const std::string& message) {
  (void)file;
  (void)lineno;
  throw tpserve::XGrammarFatalError(message);
}

void LogMessageImpl(const std::string& file, int lineno, int level, const std::string& message) {
  constexpr int kWarning = 2;  // XGRAMMAR_LOG_LEVEL_WARNING
  if (level < kWarning) return;  // info and debug
  if (tpserve::g_sink != nullptr) {
    tpserve::g_sink->push_back(message);
    return;
  }
  std::cerr << "xgrammar: " << file << ":" << lineno << ": " << message << "\n";
}

}  // namespace xgrammar
