// Tool call ids: "call_" and 24 letters and digits (OpenAI's shape), or 9 letters and digits
// for Mistral, whose templates refuse any other id when the call is sent back. Drawn from a
// seeded stream, so a test (or a replay with the same seed) gets the same ids.
//
//   CallIdGenerator ids(seed, CallIdStyle::kOpenAi);
//   std::string id = ids.Next();   // "call_3fQx..."
//
// Not cryptographic: ids only tell a request's calls apart. Threading: one per parser.
#ifndef TPSERVE_COORDINATOR_TOOLS_CALL_ID_H_
#define TPSERVE_COORDINATOR_TOOLS_CALL_ID_H_

#include <cstdint>
#include <string>

namespace tpserve {

enum class CallIdStyle {
  kOpenAi,   // "call_" + 24 alphanumerics
  kMistral,  // 9 alphanumerics
};

class CallIdGenerator {
 public:
  CallIdGenerator(uint64_t seed, CallIdStyle style) : seed_(seed), style_(style) {}
  std::string Next();

 private:
  uint64_t seed_;
  uint64_t drawn_ = 0;  // characters drawn so far
  CallIdStyle style_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_CALL_ID_H_
