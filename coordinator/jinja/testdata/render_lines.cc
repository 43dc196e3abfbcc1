// Development tool for differential testing (testdata/differential_check.py): reads JSON lines
// {"template": ..., "input": {...}} from stdin and writes, per line, {"output": ...} or
// {"error": ...} rendered with TransformersOptions() and strftime_now at 2026-01-02 03:04:05.
#include <iostream>
#include <string>

#include "absl/time/civil_time.h"
#include "coordinator/jinja/template.h"
#include "nlohmann/json.hpp"

int main() {
  using nlohmann::ordered_json;
  const absl::Time now =
      absl::FromCivil(absl::CivilSecond(2026, 1, 2, 3, 4, 5), absl::UTCTimeZone());
  std::string line;
  while (std::getline(std::cin, line)) {
    const ordered_json request = ordered_json::parse(line);
    ordered_json reply;
    absl::StatusOr<tpserve::jinja::Template> t =
        tpserve::jinja::Template::Parse(request.at("template").get<std::string>());
    absl::StatusOr<std::string> text =
        t.ok() ? t->RenderToString(request.at("input"), ordered_json::object(), now)
               : absl::StatusOr<std::string>(t.status());
    if (text.ok()) {
      reply["output"] = *text;
    } else {
      reply["error"] = std::string(text.status().message());
    }
    std::cout << reply.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << "\n"
              << std::flush;
  }
  return 0;
}
