// A cpp-httplib task queue whose threads exist only while there is work. cpp-httplib's own
// ThreadPool starts all of its threads up front, so a server sized for 64 HTTP streams would
// keep 64 idle threads even when every client speaks gRPC. Here a thread is started when a
// task arrives and no thread is idle (up to `max_threads`; past that, tasks wait in order), and
// a thread idle for `idle_timeout` exits.
//
//   server.new_task_queue = [] { return new ElasticTaskQueue(64); };
//
// Threading: enqueue from any thread; shutdown() runs what is queued, then joins every thread.
#ifndef TPSERVE_COORDINATOR_HTTP_ELASTIC_TASK_QUEUE_H_
#define TPSERVE_COORDINATOR_HTTP_ELASTIC_TASK_QUEUE_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tpserve {

class ElasticTaskQueue final : public httplib::TaskQueue {
 public:
  explicit ElasticTaskQueue(size_t max_threads, absl::Duration idle_timeout = absl::Seconds(10));
  ~ElasticTaskQueue() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  size_t threads() const;  // running now, busy or idle

 private:
  void Work(int id);
  void JoinExitedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_threads_;
  const absl::Duration idle_timeout_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> exited_ ABSL_GUARDED_BY(mu_);  // done, to be joined
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_HTTP_ELASTIC_TASK_QUEUE_H_
