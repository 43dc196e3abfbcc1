#include "coordinator/structured/mask_worker.h"

namespace tpserve {

MaskWorker::~MaskWorker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void MaskWorker::Start(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  absl::MutexLock lock(&mu_);
  jobs_ = std::move(jobs);
  pending_ = true;
}

void MaskWorker::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* pending) { return !*pending; }, &pending_));
}

void MaskWorker::Loop() {
  while (true) {
    std::vector<Job> jobs;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](MaskWorker* w) ABSL_SHARED_LOCKS_REQUIRED(w->mu_) { return w->stop_ || w->pending_; },
          this));
      if (!pending_) return;  // stopping, nothing posted
      jobs.swap(jobs_);
    }
    for (auto& [matcher, mask] : jobs) matcher->FillMask(mask);
    absl::MutexLock lock(&mu_);
    pending_ = false;
  }
}

}  // namespace tpserve
