// A POSIX shared-memory object (shm_open + mmap) mapped into this process: the memory the
// same-host ranks of ShmCommunicator share. One process creates it under a fresh random name,
// the others open it by that name, and once all have mapped it the name is unlinked, so the
// memory lives exactly as long as the last mapping and nothing is left in /dev/shm even if a
// process is killed later.
//
//   TP_ASSIGN_OR_RETURN(ShmSegment segment, ShmSegment::Create("tpserve-shm-run7", 1 << 20));
//   // publish segment.name(); a peer: ShmSegment::Open(name); once all mapped: Unlink().
//
// Create reserves the memory up front (posix_fallocate), so a full /dev/shm is an error here
// (RESOURCE_EXHAUSTED naming the bytes) instead of a SIGBUS at the first write.
// Threading: a ShmSegment is a handle owned by one thread; the memory it maps is shared, and its
// users synchronise on it with atomics of their own.
#ifndef TPSERVE_COMM_SHM_SEGMENT_H_
#define TPSERVE_COMM_SHM_SEGMENT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tpserve {

class ShmSegment {
 public:
  // A new, zero-filled object of `bytes` named "/<name_prefix>-<16 random hex digits>"; retries
  // with another suffix if the name exists. `name_prefix` may only hold [A-Za-z0-9_.-].
  static absl::StatusOr<ShmSegment> Create(absl::string_view name_prefix, size_t bytes);
  // Maps the whole of an existing object. NOT_FOUND when `name` does not exist (any more).
  static absl::StatusOr<ShmSegment> Open(const std::string& name);

  // An empty handle: maps nothing, has no name.
  ShmSegment() = default;

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  // Unmaps; does not unlink (see Unlink).
  ~ShmSegment();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // The name passed to shm_open, with its leading '/'; it lies in /dev/shm without it.
  const std::string& name() const { return name_; }

  // Removes the name, so no one else can open it; mappings stay valid. A name already gone is
  // not an error (another rank unlinked it first).
  absl::Status Unlink();

 private:
  ShmSegment(std::string name, void* data, size_t size);

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// "[A-Za-z0-9_.-]" characters of `text`, others replaced by '_', at most `max_chars` of them:
// a run id made safe for a shm name.
std::string ShmNameSafe(absl::string_view text, size_t max_chars);

}  // namespace tpserve

#endif  // TPSERVE_COMM_SHM_SEGMENT_H_
