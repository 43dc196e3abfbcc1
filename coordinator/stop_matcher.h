// Finds stop sequences in streamed text and holds back any tail that could still become one,
// so a client never sees part of a stop sequence it asked to end on.
//
//   StopMatcher stops({"\n\nUser:"});
//   StopMatcher::Result r = stops.Append(delta);  // r.emit is safe to send; r.matched ends it
//
// Input must be whole UTF-8 characters; then every `emit` is too (a held-back tail starts
// where a stop sequence starts, which is a character boundary).
// Threading: one instance per sequence, one thread at a time.
#ifndef TPSERVE_COORDINATOR_STOP_MATCHER_H_
#define TPSERVE_COORDINATOR_STOP_MATCHER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_sequences);

  struct Result {
    std::string emit;                    // text that may be sent now
    std::optional<std::string> matched;  // the stop sequence that ended the text, if any
  };

  // Appends `text`. After a match, further calls return nothing.
  Result Append(std::string_view text);
  // Releases the held-back tail at the end of generation.
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text not yet emitted: a possible start of a stop sequence
  bool done_ = false;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STOP_MATCHER_H_
