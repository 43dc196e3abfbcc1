// docs/ARCHITECTURE.md's paragraph on host waits ("Every host wait on the device ...") states
// the polling back-off the code runs (base/poll_wait.h's PollBackoff, which every device wait
// and the NCCL watchdog use). It said "50 us growing to 1 ms" while the code slept 20 us
// doubling to 100 us: this test failed on that text (issue 38). The schedule's own bounds and
// deadline are tested in //base:poll_wait_test.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/poll_wait.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

// The paragraph of docs/ARCHITECTURE.md that starts with `opening`, its lines joined by spaces.
std::string Paragraph(const std::string& opening) {
  const std::string path = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                           std::getenv("TEST_WORKSPACE") + "/docs/ARCHITECTURE.md";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  const size_t begin = text.find(opening);
  if (begin == std::string::npos) return "";
  std::string paragraph = text.substr(begin, text.find("\n\n", begin) - begin);
  for (char& c : paragraph) {
    if (c == '\n') c = ' ';
  }
  return paragraph;
}

TEST(WaitDocs, ArchitectureStatesTheBackoffTheCodeRuns) {
  const std::string paragraph = Paragraph("Every host wait on the device");
  ASSERT_FALSE(paragraph.empty()) << "the paragraph on host waits is gone";
  const std::string schedule =
      absl::StrCat(absl::ToInt64Microseconds(PollBackoff::kFirst), " us after the first and ",
                   "doubling to ", absl::ToInt64Microseconds(PollBackoff::kMax), " us");
  EXPECT_NE(paragraph.find(schedule), std::string::npos)
      << "the code sleeps " << schedule << "; the docs say: " << paragraph;
  // "doubling": each sleep twice the last until the cap, then the cap.
  PollBackoff backoff;
  absl::Duration last = backoff.Next();
  EXPECT_EQ(last, PollBackoff::kFirst);
  for (int i = 0; i < 8; ++i) {
    const absl::Duration next = backoff.Next();
    EXPECT_EQ(next, std::min(2 * last, PollBackoff::kMax)) << "sleep " << i + 2;
    last = next;
  }
  EXPECT_EQ(last, PollBackoff::kMax);
}

}  // namespace
}  // namespace tpserve
