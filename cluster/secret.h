// The cluster secret: what every call on the worker plane (ClusterControl on the coordinator,
// Worker on each rank) carries, so that only parties of one cluster can join it, load it, step
// it or shut it down. 32 random bytes as 64 hex characters, made by the launcher (or read
// from --cluster_secret_file), sent as gRPC metadata and compared in constant time.
//
//   AttachClusterSecret(&client_context, secret);                    // caller
//   if (grpc::Status s = CheckClusterSecret(*ctx, secret_); !s.ok()) return s;  // handler
//
// The worker plane has no TLS: the secret keeps out whoever can reach the ports but not the
// packets; on a network you do not trust, run the plane inside a private network or a tunnel.
// Threading: all functions are thread-safe.
#ifndef TPSERVE_CLUSTER_SECRET_H_
#define TPSERVE_CLUSTER_SECRET_H_

#include <string>

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/constant_time.h"  // IWYU pragma: export (ConstantTimeEquals)

namespace tpserve {

// The gRPC metadata key (lower case, as gRPC requires).
inline constexpr char kClusterSecretMetadataKey[] = "x-tpserve-cluster-secret";
// Shortest secret accepted from a file.
inline constexpr size_t kMinClusterSecretChars = 32;

// 32 bytes from /dev/urandom (std::random_device if it cannot be read), as 64 hex characters.
std::string NewClusterSecret();

// The first line of `path`, trailing whitespace removed. INVALID_ARGUMENT naming the path when
// it cannot be read or holds fewer than kMinClusterSecretChars characters.
absl::StatusOr<std::string> ReadClusterSecretFile(const std::string& path);

// Writes `secret` to a new file `path` with mode 0600 (fails if it exists).
absl::Status WriteClusterSecretFile(const std::string& path, absl::string_view secret);

// OK when the call carries `expected` under kClusterSecretMetadataKey; UNAUTHENTICATED when
// it carries none or another (and always when `expected` is empty: a misconfigured service
// refuses everyone rather than admitting everyone).
grpc::Status CheckClusterSecret(const grpc::ServerContext& context, const std::string& expected);

// Adds `secret` to the call's metadata.
void AttachClusterSecret(grpc::ClientContext* context, const std::string& secret);

}  // namespace tpserve

#endif  // TPSERVE_CLUSTER_SECRET_H_
