// Fills the token masks of a step's constrained sequences on a thread of its own while the
// step thread runs the model: the masks are needed only after the forward pass, so computing
// them then costs the step nothing unless it takes longer than the pass itself.
//
//   worker.Start({{&matcher, mask_span}, ...});   // returns at once
//   executor->Execute(batch);
//   worker.Wait();                                // the masks are filled
//
// Threading: Start and Wait from one thread (the engine's step thread), alternately. The
// matchers must not be touched between Start and Wait.
#ifndef TPSERVE_COORDINATOR_STRUCTURED_MASK_WORKER_H_
#define TPSERVE_COORDINATOR_STRUCTURED_MASK_WORKER_H_

#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "coordinator/structured/matcher.h"

namespace tpserve {

class MaskWorker {
 public:
  using Job = std::pair<ConstraintMatcher*, absl::Span<int32_t>>;

  MaskWorker() = default;
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // The thread starts with the first non-empty batch of jobs.
  void Start(std::vector<Job> jobs);
  void Wait();

 private:
  void Loop();

  absl::Mutex mu_;
  std::vector<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool pending_ ABSL_GUARDED_BY(mu_) = false;  // jobs_ posted and not yet done
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_MASK_WORKER_H_
