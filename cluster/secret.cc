#include "cluster/secret.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/file_text.h"

namespace tpserve {

std::string NewClusterSecret() {
  uint8_t bytes[32];
  bool filled = false;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    filled = read(fd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes));
    close(fd);
  }
  if (!filled) {
    std::random_device device;
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(device());
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : bytes) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

absl::StatusOr<std::string> ReadClusterSecretFile(const std::string& path) {
  std::optional<std::string> secret = ReadFirstLine(path);
  if (!secret) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster secret file '", path, "': cannot read a line from it"));
  }
  if (secret->size() < kMinClusterSecretChars) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster secret file '", path, "': the secret has ", secret->size(),
                     " characters; use at least ", kMinClusterSecretChars,
                     " (e.g. `head -c 32 /dev/urandom | xxd -p -c 64`)"));
  }
  return *std::move(secret);
}

absl::Status WriteClusterSecretFile(const std::string& path, absl::string_view secret) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("creating '", path, "'"));
  const std::string line = absl::StrCat(secret, "\n");
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int saved_errno = errno;
  close(fd);
  if (!written) return absl::ErrnoToStatus(saved_errno, absl::StrCat("writing '", path, "'"));
  return absl::OkStatus();
}

grpc::Status CheckClusterSecret(const grpc::ServerContext& context, const std::string& expected) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kClusterSecretMetadataKey);
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("this call carries no cluster secret (metadata '",
                                     kClusterSecretMetadataKey, "')"));
  }
  const std::string_view given(it->second.data(), it->second.size());
  if (expected.empty() || !ConstantTimeEquals(given, expected)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the cluster secret of this call is not this cluster's");
  }
  return grpc::Status::OK;
}

void AttachClusterSecret(grpc::ClientContext* context, const std::string& secret) {
  context->AddMetadata(kClusterSecretMetadataKey, secret);
}

}  // namespace tpserve
