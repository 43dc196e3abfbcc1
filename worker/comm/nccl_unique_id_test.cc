#include "worker/comm/nccl_unique_id.h"

#include <string>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

#if TPSERVE_WITH_CUDA
// ncclGetUniqueId needs NCCL and a network interface, not a GPU: it runs on the build machine.
TEST(NcclUniqueId, FreshIdsHaveTheNcclSizeAndDiffer) {
  absl::StatusOr<std::string> a = NewNcclUniqueId();
  absl::StatusOr<std::string> b = NewNcclUniqueId();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), kNcclUniqueIdBytes);
  EXPECT_NE(*a, *b);
}
#else
TEST(NcclUniqueId, UnimplementedWithoutCuda) {
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnimplemented) << id.status();
}
#endif

}  // namespace
}  // namespace tpserve
