// Command-line parsing for Abseil flags that reports every problem as a Status instead of
// exiting, so a tool can print one clear line naming the flag, the value and the bound, and
// choose its own exit code (absl::ParseCommandLine exits with 1 on any error).
//
//   absl::StatusOr<std::vector<std::string>> args = ParseFlagsStrict(argc, argv);
//   if (!args.ok()) { std::cerr << args.status().message() << "\n"; return 2; }
//
// Accepts --name=value, --name value, --bool_flag, --nobool_flag and "--" (end of flags);
// dashes in a name stand for underscores (--max-gpus is --max_gpus).
// Not thread-safe: sets global flag values; call once from main.
#ifndef TPSERVE_PLANNER_STRICT_FLAGS_H_
#define TPSERVE_PLANNER_STRICT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

// Returns the positional arguments (argv[0] excluded). INVALID_ARGUMENT "--name=value: <why>"
// for an unknown flag, a missing value or a value the flag's type rejects; a literal "--help"
// (or -h) yields NOT_FOUND("help") so the caller prints its usage.
absl::StatusOr<std::vector<std::string>> ParseFlagsStrict(int argc, char** argv);

// One line per flag defined in a file whose path contains `file_substring`:
// "  --name (default: value)  help".
std::string FlagsUsage(const std::string& file_substring);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_STRICT_FLAGS_H_
