// A small client of the public API: sends one chat message and prints the answer as it
// streams, then a usage line. Used by //deploy:client and by the launcher's first answer.
//
//   TP_RETURN_IF_ERROR(StreamChat("127.0.0.1:50051", "Hello!", {}, stdout));
#ifndef TPSERVE_DEPLOY_STREAM_CLIENT_H_
#define TPSERVE_DEPLOY_STREAM_CLIENT_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tpserve {

struct StreamClientOptions {
  int max_new_tokens = 256;
  float temperature = 0.0f;
  std::string system;            // optional system message
  absl::Duration deadline = absl::Minutes(5);
  bool print_usage = true;       // the closing "[...]" line, to stderr
  // A server on TLS: the CA that signed its certificate (PEM), and for mutual TLS this
  // client's certificate and key. Empty: plaintext.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string bearer_token;      // sent as "authorization: Bearer <token>" when not empty
};

// The gRPC status of the call as an absl::Status (message kept); NOT_FOUND naming the option
// when a TLS file cannot be read.
absl::Status StreamChat(const std::string& address, const std::string& message,
                        const StreamClientOptions& options, std::FILE* out);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_STREAM_CLIENT_H_
