#include "formats/byte_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpserve {
namespace {

// Closes the descriptor on every return path; the mapping outlives it.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MmapByteSource>> MmapByteSource::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open(\"", path, "\")"));
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fstat(\"", path, "\")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", path, "\" is not a regular file"));
  }
  const size_t size_bytes = static_cast<size_t>(st.st_size);
  if (size_bytes == 0) {
    // mmap rejects a zero length; an empty span is the honest answer.
    return std::unique_ptr<MmapByteSource>(new MmapByteSource(path, nullptr, 0));
  }
  void* addr = ::mmap(nullptr, size_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mmap(\"", path, "\", ", size_bytes, " bytes)"));
  }
  return std::unique_ptr<MmapByteSource>(
      new MmapByteSource(path, static_cast<const uint8_t*>(addr), size_bytes));
}

MmapByteSource::~MmapByteSource() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_bytes_);
}

}  // namespace tpserve
