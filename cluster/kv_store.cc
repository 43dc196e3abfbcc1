#include "cluster/kv_store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace tpserve {
namespace {

// The argument of absl::Condition: all of `keys` are in `values`.
struct AllSet {
  const std::map<std::string, std::string>* values;
  const std::vector<std::string>* keys;
};

bool HasAll(AllSet* a) {
  for (const std::string& key : *a->keys) {
    if (a->values->find(key) == a->values->end()) return false;
  }
  return true;
}

}  // namespace

void ClusterKvStore::Set(const std::string& key, std::string value) {
  absl::MutexLock lock(&mu_);
  values_[key] = std::move(value);
}

absl::StatusOr<std::string> ClusterKvStore::Get(const std::string& key,
                                                absl::Time deadline) const {
  const bool poll = deadline <= absl::Now();
  const std::vector<std::string> keys = {key};
  absl::Status waited = Wait(keys, deadline);
  if (!waited.ok()) {
    if (poll) return absl::NotFoundError(absl::StrCat("key '", key, "' is not set"));
    return waited;
  }
  absl::MutexLock lock(&mu_);
  return values_.at(key);
}

absl::Status ClusterKvStore::Wait(const std::vector<std::string>& keys,
                                  absl::Time deadline) const {
  const absl::Time start = absl::Now();
  absl::MutexLock lock(&mu_);
  // Mutex::AwaitWithDeadline re-checks the condition whenever the mutex is released by a writer.
  AllSet all_set{&values_, &keys};
  if (mu_.AwaitWithDeadline(absl::Condition(&HasAll, &all_set), deadline)) {
    return absl::OkStatus();
  }
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (values_.find(key) == values_.end()) missing.push_back(key);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("key(s) [", absl::StrJoin(missing, ", "), "] not set after ",
                   absl::FormatDuration(absl::Now() - start)));
}

size_t ClusterKvStore::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

}  // namespace tpserve
