// The coordinator's rendezvous store: keys and values that ranks write and wait for while they
// meet (Gloo addresses, the shm segment name, host identities, rank 0's NCCL unique id). In
// memory, one per launch, so no stale key of an earlier run can be read. Served to ranks by
// ClusterControl (control_service.h), read by them through a gloo::rendezvous::Store
// (control_client.h).
//
//   ClusterKvStore store;
//   store.Set("rank_1", "10.0.0.2:4000");
//   TP_ASSIGN_OR_RETURN(std::string v, store.Get("rank_1", absl::Now() + absl::Seconds(5)));
//
// Threading: every method is thread-safe; Get and Wait block their caller only.
#ifndef TPSERVE_CLUSTER_KV_STORE_H_
#define TPSERVE_CLUSTER_KV_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tpserve {

class ClusterKvStore {
 public:
  // Sets (or overwrites) `key` and wakes everyone waiting for it.
  void Set(const std::string& key, std::string value);
  // The value of `key`, waiting until `deadline` for it to be set. NOT_FOUND when it is missing
  // and `deadline` has already passed on entry (a poll); DEADLINE_EXCEEDED when it was waited
  // for and did not come.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline) const;
  // OK once every key is set; DEADLINE_EXCEEDED naming the keys still missing at `deadline`.
  absl::Status Wait(const std::vector<std::string>& keys, absl::Time deadline) const;
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tpserve

#endif  // TPSERVE_CLUSTER_KV_STORE_H_
