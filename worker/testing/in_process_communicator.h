// Communicators for ranks that are threads of one process, joined by a shared barrier: the
// test stand-in for Gloo / NCCL when checking tensor-parallel equivalence.
//
//   InProcessGroup group(4);
//   std::thread t([&] { Communicator& c = group.rank(1); c.AllReduceSum(span); });
//
// Sums are taken in rank order on every rank, so all ranks get bit-identical results.
// Threading: each rank's Communicator is used by one thread; all ranks must make the same
// calls in the same order with the same sizes (there are no deadlines here).
#ifndef TPSERVE_WORKER_TESTING_IN_PROCESS_COMMUNICATOR_H_
#define TPSERVE_WORKER_TESTING_IN_PROCESS_COMMUNICATOR_H_

#include <barrier>
#include <memory>
#include <vector>

#include "worker/comm/communicator.h"

namespace tpserve {

class InProcessGroup {
 public:
  explicit InProcessGroup(int world_size);
  ~InProcessGroup();

  int world_size() const { return world_size_; }
  Communicator& rank(int r);

 private:
  class Rank;
  friend class Rank;

  const int world_size_;
  std::barrier<> barrier_;
  std::vector<std::vector<float>> slots_;  // one staging buffer per rank
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_TESTING_IN_PROCESS_COMMUNICATOR_H_
