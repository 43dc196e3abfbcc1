#include "comm/rendezvous_store.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"

namespace tpserve {

absl::Status InMemoryRendezvousKv::Set(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  values_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryRendezvousKv::Get(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return absl::NotFoundError(absl::StrCat("key '", key, "' is not set"));
  return it->second;
}

size_t InMemoryRendezvousKv::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

KvGlooStore::KvGlooStore(RendezvousKv* kv, absl::Duration poll_interval, absl::Duration max_wait)
    : kv_(kv), poll_interval_(poll_interval), max_wait_(max_wait) {}

void KvGlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = kv_->Set(key, std::string(data.begin(), data.end()));
  if (!status.ok()) {
    throw gloo::IoException(
        absl::StrCat("rendezvous set of key '", key, "' failed: ", status.ToString()));
  }
}

std::vector<char> KvGlooStore::get(const std::string& key) {
  wait({key}, std::chrono::milliseconds(absl::ToInt64Milliseconds(max_wait_)));
  absl::StatusOr<std::string> value = kv_->Get(key);
  if (!value.ok()) {
    throw gloo::IoException(
        absl::StrCat("rendezvous get of key '", key, "' failed: ", value.status().ToString()));
  }
  return std::vector<char>(value->begin(), value->end());
}

void KvGlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(max_wait_)));
}

void KvGlooStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  // Gloo's kNoTimeout (zero) means "forever"; a rendezvous must never wait forever.
  absl::Duration limit = absl::Milliseconds(timeout.count());
  if (limit <= absl::ZeroDuration() || limit > max_wait_) limit = max_wait_;
  const absl::Time deadline = absl::Now() + limit;
  std::vector<std::string> missing = keys;
  while (true) {
    std::vector<std::string> still_missing;
    for (const std::string& key : missing) {
      absl::StatusOr<std::string> value = kv_->Get(key);
      if (value.ok()) continue;
      if (!absl::IsNotFound(value.status())) {
        throw gloo::IoException(
            absl::StrCat("rendezvous get of key '", key, "' failed: ", value.status().ToString()));
      }
      still_missing.push_back(key);
    }
    if (still_missing.empty()) return;
    missing.swap(still_missing);
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      throw gloo::IoException(absl::StrCat("Wait timeout for key(s): [",
                                           absl::StrJoin(missing, ", "), "] after ",
                                           absl::FormatDuration(limit)));
    }
    absl::SleepFor(std::min(poll_interval_, deadline - now));
  }
}

absl::Status WithFileStore(const std::string& store_dir, const std::string& run_id,
                           absl::string_view who,
                           absl::FunctionRef<absl::Status(gloo::rendezvous::Store&)> fn) {
  if (run_id.empty()) return absl::InvalidArgumentError(absl::StrCat(who, " run_id is empty"));
  std::error_code error;
  std::filesystem::create_directories(store_dir, error);
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", who, " store directory '",
                                                      store_dir, "': ", error.message()));
  }
  try {
    gloo::rendezvous::FileStore file_store(store_dir);
    gloo::rendezvous::PrefixStore store(run_id, file_store);
    return fn(store);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat(who, " FileStore in '", store_dir, "': ", e.what()));
  }
}

}  // namespace tpserve
