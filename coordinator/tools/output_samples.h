// Model outputs in every tool-call and reasoning format, with what each must parse to: the
// corpus behind the streaming tests (every split of each must parse the same as the whole).
// Well-formed calls, several calls, text around them, malformed and unfinished calls, calls
// to unknown functions, JSON that is only content, multi-byte text.
#ifndef TPSERVE_COORDINATOR_TOOLS_OUTPUT_SAMPLES_H_
#define TPSERVE_COORDINATOR_TOOLS_OUTPUT_SAMPLES_H_

#include <string>
#include <utility>
#include <vector>

#include "coordinator/tools/output_parser.h"

namespace tpserve {

struct OutputSample {
  std::string name;
  OutputParser::Options options;
  std::string text;  // the generated text, special tokens' text included
  // Expected: content, reasoning, and each call's (name, arguments).
  std::string content;
  std::string reasoning;
  std::vector<std::pair<std::string, std::string>> calls;
  // A malformed call beside the good ones: its markers are content.
  bool malformed_call_too = false;
};

// The request's functions in every sample: get_weather and search.
const std::vector<OutputSample>& OutputSamples();

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_OUTPUT_SAMPLES_H_
