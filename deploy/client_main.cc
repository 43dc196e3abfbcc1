// Streams an answer from a running tpserve cluster.
//
//   bazel run //deploy:client -- "What is tensor parallelism?"
//   bazel run //deploy:client -- --address=127.0.0.1:50051 --max_new_tokens=64 "Hello"
//   bazel run //deploy:client -- --tls_ca_file=ca.pem --auth_token_file=token "Hello"
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_join.h"
#include "base/file_text.h"
#include "deploy/stream_client.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051", "the cluster's public API");
ABSL_FLAG(int, max_new_tokens, 256, "most tokens to generate");
ABSL_FLAG(double, temperature, 0.0, "0 = greedy");
ABSL_FLAG(std::string, system, "", "system message");
ABSL_FLAG(std::string, tls_ca_file, "", "the server is on TLS: the CA (PEM) that signed its certificate");
ABSL_FLAG(std::string, tls_cert_file, "", "mutual TLS: this client's certificate (PEM)");
ABSL_FLAG(std::string, tls_key_file, "", "mutual TLS: this client's key (PEM)");
ABSL_FLAG(std::string, auth_token_file, "", "a file whose first line is the server's bearer token");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tpserve client: client [flags] \"your question\"");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    std::fprintf(stderr, "client: give the question as an argument\n");
    return 2;
  }
  const std::string question =
      absl::StrJoin(std::vector<std::string>(args.begin() + 1, args.end()), " ");
  tpserve::StreamClientOptions options;
  options.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  options.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  options.system = absl::GetFlag(FLAGS_system);
  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  if (!absl::GetFlag(FLAGS_auth_token_file).empty()) {
    const std::optional<std::string> token = tpserve::ReadFirstLine(absl::GetFlag(FLAGS_auth_token_file));
    if (!token) {
      std::fprintf(stderr, "client: --auth_token_file = %s: cannot read a token from it\n",
                   absl::GetFlag(FLAGS_auth_token_file).c_str());
      return 2;
    }
    options.bearer_token = *token;
  }
  absl::Status s = tpserve::StreamChat(absl::GetFlag(FLAGS_address), question, options, stdout);
  if (!s.ok()) {
    std::fprintf(stderr, "client: %s (%s)\n", std::string(s.message()).c_str(),
                 absl::StatusCodeToString(s.code()).c_str());
    return 1;
  }
  return 0;
}
