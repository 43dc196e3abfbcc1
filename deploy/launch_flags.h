// The launcher's flags (deploy/launch_main.cc), read once into one value: the first of its three
// steps, flags -> plan (deploy/cluster_plan.h) -> serve (deploy/serve.h). Every flag is defined
// here, so the binary that links this library has them all, as `launch --help` lists them.
//
//   absl::ParseCommandLine(argc, argv);
//   const LaunchFlags flags = ReadLaunchFlags();
#ifndef TPSERVE_DEPLOY_LAUNCH_FLAGS_H_
#define TPSERVE_DEPLOY_LAUNCH_FLAGS_H_

#include <cstdint>
#include <string>

namespace tpserve {

// One field per flag, named as the flag (the help texts are in launch_flags.cc).
struct LaunchFlags {
  int ranks;
  int gpus;
  int pp;
  std::string model;
  std::string checkpoint;
  std::string gpu;
  std::string weights;
  std::string kv_dtype;
  std::string listen;
  int port;
  int http_port;
  int http_threads;
  int threads_per_rank;
  int context;
  int max_seqs;
  int64_t max_tokens_per_step;  // 0: DefaultMaxTokensPerStep(gpus > 0)
  std::string comm;
  bool deterministic_tp;
  int64_t deterministic_tp_chunks;
  bool expert_parallel;
  bool attention_dp;
  int collective_timeout_ms;
  int startup_timeout_ms;
  bool strict_kernels;
  bool enforce_eager;
  bool spawn_ranks;
  std::string worker_listen;
  std::string cluster_secret_file;
  int join_timeout_s;
  int rank_replace_timeout_s;
  bool rank_replace_timeout_given;  // on the command line (GPU ranks are replaced only then)
  std::string ready_file;
  bool prefix_caching;
  int max_queued_requests;
  int drain_timeout_s;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::string auth_token_file;
  std::string reflection;
  std::string served_model_name;
  std::string chat_template;
  std::string tool_call_parser;
  std::string reasoning_parser;
  bool structured_output;
  int structured_compile_timeout_ms;
  int structured_max_constraint_bytes;
  int64_t structured_max_grammar_bytes;
  int64_t structured_cache_bytes;
  bool jump_forward;
  std::string speculative;
  std::string draft_model;
  std::string draft_weights;
  int num_speculative_tokens;
  bool speculative_adaptive;
  int speculative_max_batch;
  std::string demo_prompt;
};

// The parsed flags' values. REQUIRES: absl::ParseCommandLine has run.
LaunchFlags ReadLaunchFlags();

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_LAUNCH_FLAGS_H_
