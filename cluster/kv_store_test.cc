// The coordinator's rendezvous store: set/get, a poll of a missing key, waits that end when
// the key comes and ones that time out naming the missing keys, and many writers and
// waiters at once.
#include "cluster/kv_store.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tpserve {
namespace {

TEST(ClusterKvStoreTest, SetThenGetAndOverwrite) {
  ClusterKvStore store;
  store.Set("a", "1");
  EXPECT_EQ(*store.Get("a", absl::InfinitePast()), "1");
  store.Set("a", "2");
  EXPECT_EQ(*store.Get("a", absl::InfinitePast()), "2");
  EXPECT_EQ(store.size(), 1u);
}

TEST(ClusterKvStoreTest, PollOfAMissingKeyIsNotFound) {
  ClusterKvStore store;
  absl::StatusOr<std::string> v = store.Get("nope", absl::InfinitePast());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(v.status().message(), "key 'nope' is not set");
}

TEST(ClusterKvStoreTest, GetWaitsForALaterSet) {
  ClusterKvStore store;
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    store.Set("late", "here");
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> v = store.Get("late", absl::Now() + absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "here");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(ClusterKvStoreTest, WaitTimesOutNamingTheMissingKeys) {
  ClusterKvStore store;
  store.Set("b", "x");
  const absl::Time start = absl::Now();
  absl::Status s = store.Wait({"a", "b", "c"}, absl::Now() + absl::Milliseconds(100));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("key(s) [a, c] not set after"), std::string::npos) << s;
  absl::StatusOr<std::string> v = store.Get("a", absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
}

// Eight ranks each set their own key and wait for all eight, as Gloo's full mesh does.
TEST(ClusterKvStoreTest, ConcurrentRanksAllSeeEveryKey) {
  constexpr int kRanks = 8;
  ClusterKvStore store;
  std::vector<std::string> keys;
  for (int r = 0; r < kRanks; ++r) keys.push_back(absl::StrCat("rank_", r));
  std::vector<absl::Status> results(kRanks);
  std::vector<std::string> seen(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      store.Set(keys[r], absl::StrCat("addr", r));
      results[r] = store.Wait(keys, absl::Now() + absl::Seconds(10));
      for (const std::string& key : keys) seen[r] += *store.Get(key, absl::InfinitePast());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(seen[r], "addr0addr1addr2addr3addr4addr5addr6addr7");
  }
}

}  // namespace
}  // namespace tpserve
