#include "coordinator/http/elastic_task_queue.h"

#include <utility>

namespace tpserve {

ElasticTaskQueue::ElasticTaskQueue(size_t max_threads, absl::Duration idle_timeout)
    : max_threads_(max_threads < 1 ? 1 : max_threads), idle_timeout_(idle_timeout) {}

ElasticTaskQueue::~ElasticTaskQueue() { shutdown(); }

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  JoinExitedLocked();
  tasks_.push_back(std::move(fn));
  // An idle thread takes it; otherwise one more thread, while under the cap.
  if (idle_ >= tasks_.size() || threads_.size() >= max_threads_ || stop_) return;
  const int id = next_id_++;
  threads_.emplace(id, std::thread([this, id] { Work(id); }));
}

void ElasticTaskQueue::Work(int id) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (tasks_.empty()) {
      if (stop_) break;
      ++idle_;
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !tasks_.empty() || stop_; };
      const bool woke = mu_.AwaitWithTimeout(absl::Condition(&ready), idle_timeout_);
      --idle_;
      if (!woke) break;  // idle too long
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    mu_.Lock();
  }
  // Hand our std::thread to whoever joins next; it is joinable once this function returns.
  auto it = threads_.find(id);
  exited_.push_back(std::move(it->second));
  threads_.erase(it);
}

void ElasticTaskQueue::JoinExitedLocked() {
  std::vector<std::thread> done;
  done.swap(exited_);
  mu_.Unlock();
  for (std::thread& t : done) t.join();
  mu_.Lock();
}

void ElasticTaskQueue::shutdown() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  auto all_gone = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return threads_.empty(); };
  mu_.Await(absl::Condition(&all_gone));
  JoinExitedLocked();
}

size_t ElasticTaskQueue::threads() const {
  absl::MutexLock lock(&mu_);
  return threads_.size();
}

}  // namespace tpserve
