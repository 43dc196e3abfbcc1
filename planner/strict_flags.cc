#include "planner/strict_flags.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

bool IsBool(const absl::CommandLineFlag& flag) { return flag.IsOfType<bool>(); }

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseFlagsStrict(int argc, char** argv) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.emplace_back(argv[i]);
      break;
    }
    if (arg == "--help" || arg == "-h" || arg == "-help") return absl::NotFoundError("help");
    if (!arg.starts_with("-") || arg == "-") {
      positional.emplace_back(arg);
      continue;
    }
    arg.remove_prefix(arg.starts_with("--") ? 2 : 1);
    const size_t eq = arg.find('=');
    // Dashes and underscores are interchangeable in names: --host-bandwidth-gbs works too.
    std::string name(arg.substr(0, eq));
    std::replace(name.begin(), name.end(), '-', '_');
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(arg.substr(eq + 1));
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && !value && name.starts_with("no")) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && IsBool(*negated)) {
        flag = negated;
        value = "false";
      }
    }
    if (flag == nullptr || flag->IsRetired()) {
      return absl::InvalidArgumentError(StrCat("--", name, ": unknown flag (see --help)"));
    }
    if (!value) {
      if (IsBool(*flag)) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(StrCat("--", name, ": missing value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) {
      return absl::InvalidArgumentError(StrCat("--", name, "=", *value, ": ", error));
    }
  }
  return positional;
}

std::string FlagsUsage(const std::string& file_substring) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), file_substring)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string out;
  for (const absl::CommandLineFlag* f : flags) {
    absl::StrAppend(&out, "  --", f->Name(), " (default: \"", f->DefaultValue(), "\")\n      ",
                    f->Help(), "\n");
  }
  return out;
}

}  // namespace tpserve
