#include "comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpserve {
namespace {

absl::StatusOr<uint64_t> RandomSuffix() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != static_cast<ssize_t>(sizeof(value))) {
    return absl::ErrnoToStatus(errno, "getrandom for a shm segment name");
  }
  return value;
}

bool NameSafe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

}  // namespace

std::string ShmNameSafe(absl::string_view text, size_t max_chars) {
  std::string safe(text.substr(0, max_chars));
  for (char& c : safe) {
    if (!NameSafe(c)) c = '_';
  }
  return safe;
}

absl::StatusOr<ShmSegment> ShmSegment::Create(absl::string_view name_prefix, size_t bytes) {
  for (char c : name_prefix) {
    if (!NameSafe(c)) {
      return absl::InvalidArgumentError(absl::StrCat("shm name prefix '", name_prefix, "' holds '",
                                                     std::string(1, c),
                                                     "'; only [A-Za-z0-9_.-] are allowed"));
    }
  }
  if (bytes == 0) return absl::InvalidArgumentError("shm segment of 0 bytes");
  // 64 random bits: a collision with a live segment is not expected; O_EXCL makes it harmless.
  for (int attempt = 0; attempt < 8; ++attempt) {
    absl::StatusOr<uint64_t> suffix = RandomSuffix();
    if (!suffix.ok()) return suffix.status();
    std::string name = absl::StrFormat("/%s-%016x", name_prefix, *suffix);
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("shm_open(\"", name, "\")"));
    // ftruncate alone would let a full /dev/shm raise SIGBUS at the first touch of a page.
    int error = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
    if (error == 0) error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    void* data = MAP_FAILED;
    if (error == 0) {
      data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (data == MAP_FAILED) error = errno;
    }
    close(fd);
    if (error != 0) {
      shm_unlink(name.c_str());
      return absl::ErrnoToStatus(error, absl::StrCat("shm segment ", name, ": cannot reserve ",
                                                     bytes, " bytes in /dev/shm"));
    }
    return ShmSegment(std::move(name), data, bytes);
  }
  return absl::AlreadyExistsError(
      absl::StrCat("shm segment: 8 random names with prefix '", name_prefix, "' all exist"));
}

absl::StatusOr<ShmSegment> ShmSegment::Open(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("shm_open(\"", name, "\")"));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("fstat of shm segment ", name));
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("shm segment ", name, " has 0 bytes"));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (data == MAP_FAILED) {
    return absl::ErrnoToStatus(error,
                               absl::StrCat("mmap of shm segment ", name, " (", bytes, " bytes)"));
  }
  return ShmSegment(name, data, bytes);
}

ShmSegment::ShmSegment(std::string name, void* data, size_t size)
    : name_(std::move(name)), data_(data), size_(size) {}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  if (data_ != nullptr) munmap(data_, size_);
}

absl::Status ShmSegment::Unlink() {
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("shm_unlink(\"", name_, "\")"));
  }
  return absl::OkStatus();
}

}  // namespace tpserve
