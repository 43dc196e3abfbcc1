#include "comm/rendezvous_store.h"

#include <string>
#include <thread>
#include <vector>

#include "gloo/common/error.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

TEST(InMemoryRendezvousKv, GetIsNotFoundUntilSet) {
  InMemoryRendezvousKv kv;
  EXPECT_EQ(kv.Get("rank0").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(kv.Set("rank0", std::string("a\0b", 3)).ok());
  absl::StatusOr<std::string> value = kv.Get("rank0");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, std::string("a\0b", 3));
  EXPECT_EQ(kv.size(), 1u);
}

TEST(KvGlooStore, SetThenGetRoundTripsBinaryValues) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  store.set("addr/1", Bytes(std::string("\x01\x00\xff", 3)));
  EXPECT_EQ(store.get("addr/1"), Bytes(std::string("\x01\x00\xff", 3)));
}

TEST(KvGlooStore, WaitReturnsOnceAnotherThreadSetsTheKeys) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv, absl::Milliseconds(1), absl::Seconds(20));
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    ASSERT_TRUE(kv.Set("a", "1").ok());
    ASSERT_TRUE(kv.Set("b", "2").ok());
  });
  store.wait({"a", "b"}, std::chrono::milliseconds(20000));
  writer.join();
  EXPECT_EQ(store.get("b"), Bytes("2"));
}

TEST(KvGlooStore, WaitForAMissingKeyThrowsGlooTimeoutNamingTheKey) {
  InMemoryRendezvousKv kv;
  ASSERT_TRUE(kv.Set("present", "x").ok());
  KvGlooStore store(&kv, absl::Milliseconds(1));
  try {
    store.wait({"present", "absent"}, std::chrono::milliseconds(30));
    FAIL() << "wait returned for a key nobody set";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("Wait timeout for key(s): [absent] after 30ms"),
              std::string::npos)
        << e.what();
  }
}

TEST(KvGlooStore, GlooNoTimeoutIsBoundedByMaxWait) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv, absl::Milliseconds(1), /*max_wait=*/absl::Milliseconds(40));
  try {
    store.wait({"never"}, std::chrono::milliseconds(0));  // gloo::kNoTimeout
    FAIL() << "wait without timeout did not end";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("after 40ms"), std::string::npos) << e.what();
  }
}

class FailingKv final : public RendezvousKv {
 public:
  absl::Status Set(const std::string&, const std::string&) override {
    return absl::UnavailableError("coordinator unreachable");
  }
  absl::StatusOr<std::string> Get(const std::string&) override {
    return absl::PermissionDeniedError("run id revoked");
  }
};

TEST(KvGlooStore, ServiceErrorsBecomeGlooExceptionsWithTheStatus) {
  FailingKv kv;
  KvGlooStore store(&kv);
  try {
    store.set("k", Bytes("v"));
    FAIL() << "set did not throw";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("UNAVAILABLE: coordinator unreachable"), std::string::npos)
        << e.what();
  }
  try {
    store.wait({"k"}, std::chrono::milliseconds(1000));
    FAIL() << "wait did not throw";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("PERMISSION_DENIED: run id revoked"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tpserve
