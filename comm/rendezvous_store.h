// Gloo rendezvous over any key-value service. Gloo ranks find each other by writing their
// listening addresses into a shared store; FileStore covers processes on one host, and this
// adapter lets any other key-value service play that role (the coordinator's own store is
// reached through cluster/control_client.h, a Store of its own with server-side waits).
//
//   InMemoryRendezvousKv kv;  // or a coordinator-backed RendezvousKv
//   KvGlooStore store(&kv);   // then GlooCommunicator::Connect(options, store)
//
// KvGlooStore implements gloo::rendezvous::Store, whose contract reports failures by throwing
// (gloo::IoException); only Gloo code should call it, and GlooCommunicator turns those exceptions
// into Status. wait() polls the key-value service until every key exists or its deadline
// passes, so a rank that never shows up fails the connect instead of hanging it.
// Threading: InMemoryRendezvousKv is thread-safe. KvGlooStore is as thread-safe as its kv.
#ifndef TPSERVE_COMM_RENDEZVOUS_STORE_H_
#define TPSERVE_COMM_RENDEZVOUS_STORE_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"

namespace tpserve {

// The minimal service a rendezvous needs: write-once keys, read without blocking.
class RendezvousKv {
 public:
  virtual ~RendezvousKv() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // NOT_FOUND while `key` has not been set; any other error is a failure of the service.
  virtual absl::StatusOr<std::string> Get(const std::string& key) = 0;
};

// A map behind a mutex: for tests and for ranks that are threads of one process.
class InMemoryRendezvousKv final : public RendezvousKv {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key) override;
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

class KvGlooStore final : public gloo::rendezvous::Store {
 public:
  // `kv` must outlive the store. `max_wait` bounds every wait, including gloo's "no timeout".
  explicit KvGlooStore(RendezvousKv* kv, absl::Duration poll_interval = absl::Milliseconds(5),
                       absl::Duration max_wait = absl::Seconds(30));

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits up to max_wait for the key, like Gloo's own stores.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  RendezvousKv* kv_;
  const absl::Duration poll_interval_;
  const absl::Duration max_wait_;
};

// Runs fn with a store of keys prefixed by `run_id` in a FileStore directory (created if
// missing): how same-host ranks meet. `who` ("Gloo", "shm") names the caller in errors, which
// are INVALID_ARGUMENT for an empty run_id and FAILED_PRECONDITION for a directory that cannot
// be made or a store that throws; fn's own status otherwise.
absl::Status WithFileStore(const std::string& store_dir, const std::string& run_id,
                           absl::string_view who,
                           absl::FunctionRef<absl::Status(gloo::rendezvous::Store&)> fn);

}  // namespace tpserve

#endif  // TPSERVE_COMM_RENDEZVOUS_STORE_H_
