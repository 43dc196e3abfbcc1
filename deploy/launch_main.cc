// Starts a tensor-parallel cluster: in this process the coordinator (engine + public gRPC API)
// and the worker control plane the ranks join; the N worker rank processes on this machine
// (default) or, with --spawn_ranks=false, started elsewhere by you (docs/ARCHITECTURE.md,
// "Processes"). Shows progress while the ranks load,
// prints the address once every rank is ready, reports any rank that dies, and on Ctrl-C or
// SIGTERM drains: health goes NOT_SERVING, new requests get UNAVAILABLE, streams in flight
// finish (for up to --drain_timeout_s, then they are cancelled), and it exits 0. A rank that
// dies or stalls is named with how, and the launcher exits 1 for a supervisor to restart it.
// The workers also die with this process (PR_SET_PDEATHSIG).
//
//   bazel run //deploy:launch                          # bundled SmolLM2 on 1 CPU rank
//   bazel run //deploy:launch -- --ranks=3 --port=50051
//   bazel run //deploy:launch -- --gpus=8 --model=405b-fp8 --checkpoint=/models/405b-fp8
//   launch --ranks=3 --spawn_ranks=false --worker_listen=10.0.0.1:7000
//          --cluster_secret_file=/etc/tpserve/secret    # then on each host: worker --coordinator=...
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cluster/control_service.h"
#include "cluster/secret.h"
#include "base/file_text.h"
#include "base/status_macros.h"
#include "coordinator/gateway.h"
#include "coordinator/model_bundle.h"
#include "coordinator/remote_executor.h"
#include "coordinator/speculative/draft_model.h"
#include "coordinator/tools/tool_call_format.h"
#include "deploy/cluster_plan.h"
#include "deploy/gpu_target.h"
#include "deploy/stream_client.h"
#include "deploy/worker_plane.h"
#include "kernels/cuda_devices.h"
#include "checkpoint/stored_formats.h"
#include "planner/plan_report.h"
#include "planner/roofline.h"

ABSL_FLAG(int, ranks, 1, "CPU worker ranks (tensor-parallel degree)");
ABSL_FLAG(int, gpus, 0, "GPU ranks: one per GPU (needs that many CUDA devices)");
ABSL_FLAG(std::string, model, "smollm2",
          "a .gguf file, a Hugging Face directory, a bundled model (smollm2, gemma3-270m), or "
          "with --gpus a shape preset with its weights, e.g. 405b-fp8, 70b-bf16, 8b-int4");
ABSL_FLAG(std::string, checkpoint, "",
          "with --gpus and a shape preset: the checkpoint directory that holds its weights");
ABSL_FLAG(std::string, gpu, "",
          "with --gpus on a machine without GPUs: the GPU kind the plan sizes for (a //deploy:vram "
          "preset; default h100-80g, the product's). With GPUs the plan is for the ones found");
ABSL_FLAG(std::string, weights, "",
          "hold weights as stored (default) or quantize on load: fp8, fp8-block, int4, "
          "int4-g64, bf16, ... (the presets of //deploy:vram --weights)");
ABSL_FLAG(std::string, kv_dtype, "auto",
          "KV cache dtype: auto (bf16 on GPU ranks, their activations' type, which FlashInfer's "
          "attention reads as stored; f16 on CPU ranks), f32, f16, bf16 or fp8");
ABSL_FLAG(std::string, listen, "127.0.0.1", "host for the public API");
ABSL_FLAG(int, port, 50051, "port for the public gRPC API (0 = any free port)");
ABSL_FLAG(int, http_port, 8080,
          "port for the OpenAI-compatible HTTP API and /metrics on the same host (0 = off)");
ABSL_FLAG(int, http_threads, 64,
          "HTTP connections served at once (each open HTTP stream holds one thread)");
ABSL_FLAG(int, threads_per_rank, 0, "CPU threads per rank (default: cores / ranks)");
ABSL_FLAG(int, context, 4096, "context window served, tokens (capped by the model's)");
ABSL_FLAG(int, max_seqs, 8, "sequences batched per step");
ABSL_FLAG(std::string, comm, "auto",
          "collectives between CPU ranks: auto (shared memory when all ranks share a host, else "
          "Gloo over TCP), shm or gloo");
ABSL_FLAG(bool, deterministic_tp, false,
          "row-parallel layers reduce in fixed chunks (f32 all-gather) so every --ranks gives "
          "the same floats; costs C x the bytes of the default all-reduce (docs/PERFORMANCE.md). "
          "On GPUs also pinned GEMM algorithms and per-row attention splits "
          "(kernels/cuda/README.md), slower for long prompts");
ABSL_FLAG(int, collective_timeout_ms, 5000, "a collective that waits longer fails");
ABSL_FLAG(bool, spawn_ranks, true,
          "start the ranks as processes on this machine; false: wait for --ranks workers started "
          "elsewhere (worker --coordinator=<--worker_listen> --rank=R --cluster_secret_file=F) "
          "to join");
ABSL_FLAG(std::string, worker_listen, "",
          "HOST:PORT of the worker control plane the ranks join; default 127.0.0.1:0 (any free "
          "port) when this process spawns the ranks; required with --spawn_ranks=false");
ABSL_FLAG(std::string, cluster_secret_file, "",
          "file holding the cluster secret every worker-plane call carries (at least 32 "
          "characters); required with --spawn_ranks=false; default: a fresh one per launch");
ABSL_FLAG(int, join_timeout_s, 300, "how long to wait for every rank to join");
ABSL_FLAG(std::string, ready_file, "",
          "once serving, write the gRPC address here (line 1) and the HTTP base URL (line 2, "
          "when --http_port is not 0), for scripts");
ABSL_FLAG(bool, prefix_caching, true,
          "reuse the KV cache of full blocks of earlier prompts (automatic prefix caching)");
ABSL_FLAG(int, max_queued_requests, 256,
          "requests that may wait for a place in the batch; past it RESOURCE_EXHAUSTED / 429");
ABSL_FLAG(int, drain_timeout_s, 30,
          "on SIGTERM, how long streams in flight may run before they are cancelled");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate (chain) for the public ports: TLS");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA: clients must present a certificate it signed (mutual TLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding a bearer token every request must carry (Authorization: Bearer ...)");
ABSL_FLAG(std::string, reflection, "auto",
          "gRPC server reflection: on, off, or auto (on only for a loopback --listen)");
ABSL_FLAG(std::string, served_model_name, "",
          "the model id clients send as `model` and see in responses (default: the model's "
          "general.name)");
ABSL_FLAG(std::string, chat_template, "",
          "a Jinja chat template file that replaces the model's own (tokenizer.chat_template "
          "or tokenizer_config.json's chat_template)");
ABSL_FLAG(std::string, tool_call_parser, "",
          "how the model writes tool calls: hermes, llama3_json, mistral, deepseek_v3 or "
          "deepseek_v31 (default: the format its chat template renders calls in, else hermes)");
ABSL_FLAG(std::string, reasoning_parser, "",
          "return <think>...</think> as reasoning_content: qwen3 or deepseek_r1 (default: off, "
          "the reasoning stays in the content)");
ABSL_FLAG(bool, structured_output, true,
          "serve structured output (JSON schema, regex, grammar, choice); off: such requests "
          "are refused with FAILED_PRECONDITION");
ABSL_FLAG(int, structured_compile_timeout_ms, 10000,
          "a constraint that takes longer to compile is refused (INVALID_ARGUMENT)");
ABSL_FLAG(int, structured_max_constraint_bytes, 64 << 10,
          "largest schema, regex, grammar or list of choices accepted, bytes");
ABSL_FLAG(int64_t, structured_max_grammar_bytes, int64_t{256} << 20,
          "largest compiled grammar (its token-mask caches), bytes");
ABSL_FLAG(int64_t, structured_cache_bytes, int64_t{1} << 30,
          "compiled grammars kept for reuse (LRU), bytes");
ABSL_FLAG(bool, jump_forward, true,
          "structured output: append text the constraint forces without a sampling step each");
ABSL_FLAG(std::string, speculative, "off",
          "speculative decoding: off, ngram (prompt lookup: drafts from the prompt and the output "
          "so far) or draft (a smaller model with the same vocabulary, --draft_model, on the same "
          "ranks); greedy and seeded tokens are the same as with off (docs/API.md)");
ABSL_FLAG(std::string, draft_model, "",
          "--speculative=draft: the draft model, a path (GGUF or Hugging Face directory) or "
          "smollm2; its weights, buffers and KV are in the memory plan");
ABSL_FLAG(std::string, draft_weights, "",
          "the draft model's weights as stored (default) or a preset, as --weights");
ABSL_FLAG(int, num_speculative_tokens, 4, "the most tokens a sequence drafts per step (K), 1..16");
ABSL_FLAG(bool, speculative_adaptive, true,
          "choose each sequence's K from its recent acceptance, off where none pays");
ABSL_FLAG(int, speculative_max_batch, 4,
          "no sequence drafts in a step where more than this many decode: the step is compute-"
          "bound there (docs/PERFORMANCE.md); 0 = no limit");
ABSL_FLAG(std::string, demo_prompt, "",
          "once serving, stream an answer to this question through the public API");

namespace tpserve {
namespace {

std::map<pid_t, int> g_rank_of_pid;  // written before the signal thread starts

int Fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "launch: %s\n", message.c_str());
  return code;
}

// --chat_template; a relative path is the caller's (`bazel run` starts in the runfiles tree).
ModelBundleOptions BundleOptions() {
  ModelBundleOptions options;
  options.chat_template_file = absl::GetFlag(FLAGS_chat_template);
  const char* caller_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (!options.chat_template_file.empty() && caller_dir != nullptr &&
      std::filesystem::path(options.chat_template_file).is_relative()) {
    options.chat_template_file =
        (std::filesystem::path(caller_dir) / options.chat_template_file).string();
  }
  return options;
}

std::string FindWorkerBinary(const char* argv0) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TPSERVE_WORKER_BIN")) candidates.push_back(env);
  candidates.push_back(absl::StrCat(argv0, ".runfiles/tpserve/worker/worker"));
  candidates.push_back("worker/worker");  // cwd of `bazel run` is the runfiles tree
  candidates.push_back(
      (std::filesystem::path(argv0).parent_path() / ".." / "worker" / "worker").string());
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

// A rank on this host, through the same door as every other: it joins `coordinator`. The
// secret travels in a file of the private run directory, never in argv (which `ps` shows).
pid_t SpawnWorker(const std::string& binary, const std::string& coordinator, int rank,
                  const std::string& secret_file) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const std::string coordinator_flag = "--coordinator=" + coordinator;
  const std::string rank_flag = absl::StrCat("--rank=", rank);
  const std::string secret_flag = "--cluster_secret_file=" + secret_file;
  execl(binary.c_str(), binary.c_str(), coordinator_flag.c_str(), rank_flag.c_str(),
        "--listen=127.0.0.1:0", secret_flag.c_str(), nullptr);
  std::fprintf(stderr, "launch: cannot run %s\n", binary.c_str());
  _exit(127);
}

// OK while every spawned rank still runs; UNAVAILABLE naming the first that exited.
absl::Status SpawnedRanksAlive(const std::vector<pid_t>& pids) {
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
      return absl::UnavailableError(absl::StrCat("rank ", r, " (pid ", pids[r],
                                                 ") exited before it joined"));
    }
  }
  return absl::OkStatus();
}

void StopChildren(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  for (pid_t p : pids) {
    while (waitpid(p, nullptr, WNOHANG) == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (kill(p, 0) == 0) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
  }
}

// Everything a launch has decided before it starts processes.
struct LaunchSetup {
  ModelBundle* bundle = nullptr;
  ClusterRequest request;  // what the plan was made for, and what the ranks open
  ClusterPlan plan;
  int ranks = 1;
  std::string backend = "cpu";
  std::string comm_kind = "auto";
};

// The --speculative flags into a ClusterRequest (with the draft model's path).
absl::Status SpeculationFlags(int ranks, ClusterRequest& want) {
  absl::StatusOr<SpeculativeMethod> method =
      ParseSpeculativeMethod(absl::GetFlag(FLAGS_speculative));
  if (!method.ok()) return method.status();
  SpeculativeOptions& spec = want.speculative;
  spec.method = *method;
  spec.num_speculative_tokens = absl::GetFlag(FLAGS_num_speculative_tokens);
  spec.adaptive = absl::GetFlag(FLAGS_speculative_adaptive);
  spec.max_batch = absl::GetFlag(FLAGS_speculative_max_batch);
  TP_RETURN_IF_ERROR(ValidateSpeculativeOptions(spec));
  const std::string draft = absl::GetFlag(FLAGS_draft_model);
  if ((spec.method == SpeculativeMethod::kDraft) != !draft.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--draft_model=", draft, ": a draft model is given exactly with --speculative=draft (--speculative=",
        SpeculativeMethodName(spec.method), ")"));
  }
  if (draft.empty()) return absl::OkStatus();
  want.draft_weights = absl::GetFlag(FLAGS_draft_weights);
  TP_ASSIGN_OR_RETURN(want.draft, ResolveDraftModel(draft, want.draft_weights, ranks,
                                                    &want.draft_model_path));
  return absl::OkStatus();
}

int Serve(const char* argv0, const LaunchSetup& setup);

// The shapes that decide which slices ranks load (names and context may differ).
bool SameShape(const ModelSpec& a, const ModelSpec& b) {
  return a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_layers == b.num_layers &&
         a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim;
}

// --kv_dtype, with auto resolved for GPU or CPU ranks.
absl::StatusOr<DType> KvDtypeFlag(bool gpu) {
  const std::string flag = absl::GetFlag(FLAGS_kv_dtype);
  if (flag == "auto") return gpu ? DType::kBF16 : DType::kF16;
  absl::StatusOr<DType> kv = ParseKvDtype(flag);
  if (!kv.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_dtype: ", kv.status().message()));
  }
  return kv;
}

// What the ranks get that the plan does not size: their threads and the collective timeout.
void RankFlags(ClusterRequest& want) {
  want.threads_per_rank = absl::GetFlag(FLAGS_threads_per_rank);
  want.collective_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_collective_timeout_ms));
}

int CpuMain(const char* argv0) {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const std::string comm = absl::GetFlag(FLAGS_comm);
  if (comm != "auto" && comm != "shm" && comm != "gloo") {
    return Fail(absl::StrCat("--comm = \"", comm, "\" must be auto, shm or gloo"), 2);
  }
  if (ranks < 1 || ranks > 64) {
    return Fail(absl::StrCat("--ranks = ", ranks, " must be in [1, 64]"), 2);
  }
  absl::StatusOr<std::string> model_path = ResolveModelPath(absl::GetFlag(FLAGS_model));
  if (!model_path.ok()) return Fail(std::string(model_path.status().message()), 2);
  absl::StatusOr<ModelBundle> bundle = LoadModelBundle(*model_path, BundleOptions());
  if (!bundle.ok()) return Fail(std::string(bundle.status().message()));
  absl::StatusOr<DType> kv_dtype = KvDtypeFlag(/*gpu=*/false);
  if (!kv_dtype.ok()) return Fail(std::string(kv_dtype.status().message()), 2);

  ClusterRequest want;
  want.ranks = ranks;
  want.context_tokens = absl::GetFlag(FLAGS_context);
  want.max_seqs = absl::GetFlag(FLAGS_max_seqs);
  want.weights = absl::GetFlag(FLAGS_weights);
  want.kv_dtype = *kv_dtype;
  want.deterministic_tp = absl::GetFlag(FLAGS_deterministic_tp);
  RankFlags(want);
  want.model_path = *model_path;
  if (absl::Status s = SpeculationFlags(ranks, want); !s.ok()) {
    return Fail(std::string(s.message()), 2);
  }
  absl::StatusOr<ClusterPlan> plan = PlanCluster(bundle->files, want);
  if (!plan.ok()) return Fail(std::string(plan.status().message()), 2);
  std::fprintf(stderr, "%s", plan->summary.c_str());
  LaunchSetup setup;
  setup.bundle = &*bundle;
  setup.request = std::move(want);
  setup.plan = *std::move(plan);
  setup.ranks = ranks;
  setup.comm_kind = comm;
  return Serve(argv0, setup);
}

// The parsers' name errors already quote the value and list the valid names.
absl::Status FlagError(const char* flag, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", status.message()));
}

// The public API's options from the flags: address, admission, TLS, bearer token, reflection.
absl::StatusOr<GatewayOptions> PublicApiOptions() {
  GatewayOptions options;
  options.listen = absl::StrCat(absl::GetFlag(FLAGS_listen), ":", absl::GetFlag(FLAGS_port));
  const int queued = absl::GetFlag(FLAGS_max_queued_requests);
  if (queued < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_queued_requests = ", queued, " must be at least 0"));
  }
  if (absl::GetFlag(FLAGS_drain_timeout_s) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--drain_timeout_s = ", absl::GetFlag(FLAGS_drain_timeout_s), " must be at least 0"));
  }
  options.frontend.max_queued_requests = queued;
  if (const std::string name = absl::GetFlag(FLAGS_tool_call_parser); !name.empty()) {
    absl::StatusOr<ToolCallFormat> format = ParseToolCallFormatName(name);
    if (!format.ok()) return FlagError("--tool_call_parser", format.status());
    options.frontend.output_formats.tool_calls = *format;  // else set from the model's template
  }
  if (const std::string name = absl::GetFlag(FLAGS_reasoning_parser); !name.empty()) {
    absl::StatusOr<ReasoningFormat> format = ParseReasoningFormatName(name);
    if (!format.ok()) return FlagError("--reasoning_parser", format.status());
    options.frontend.output_formats.reasoning = *format;
  }
  if (absl::GetFlag(FLAGS_structured_output)) {
    ConstraintLimits limits;
    const int timeout_ms = absl::GetFlag(FLAGS_structured_compile_timeout_ms);
    const int max_bytes = absl::GetFlag(FLAGS_structured_max_constraint_bytes);
    if (timeout_ms < 1 || max_bytes < 1 || absl::GetFlag(FLAGS_structured_max_grammar_bytes) < 1 ||
        absl::GetFlag(FLAGS_structured_cache_bytes) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--structured_compile_timeout_ms = ", timeout_ms, ", --structured_max_constraint_bytes = ",
          max_bytes, " and --structured_max_grammar_bytes = ",
          absl::GetFlag(FLAGS_structured_max_grammar_bytes),
          " must be at least 1, --structured_cache_bytes at least 0"));
    }
    limits.compile_timeout = absl::Milliseconds(timeout_ms);
    limits.max_text_bytes = max_bytes;
    limits.max_compiled_bytes = absl::GetFlag(FLAGS_structured_max_grammar_bytes);
    limits.cache_bytes = absl::GetFlag(FLAGS_structured_cache_bytes);
    options.structured = limits;
  } else {
    options.structured.reset();
  }
  options.http_port = absl::GetFlag(FLAGS_http_port);
  options.http_threads = absl::GetFlag(FLAGS_http_threads);
  if (options.http_port < 0 || options.http_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_port = ", options.http_port, " must be in [0, 65535] (0 = off)"));
  }
  if (options.http_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_threads = ", options.http_threads, " must be at least 1"));
  }
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  const std::string token_file = absl::GetFlag(FLAGS_auth_token_file);
  if (!token_file.empty()) {
    const std::optional<std::string> token = ReadFirstLine(token_file);
    if (!token) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth_token_file = ", token_file, ": cannot read a token from it"));
    }
    if (token->size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth_token_file = ", token_file, ": the token has ", token->size(),
          " characters; use at least 16"));
    }
    options.frontend.bearer_token = *token;
  }
  const std::string reflection = absl::GetFlag(FLAGS_reflection);
  if (reflection == "on" || reflection == "off") {
    options.reflection = reflection == "on";
  } else if (reflection != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--reflection = ", reflection, " must be on, off or auto"));
  }
  return options;
}

// The worker ranks of this launch: the control plane they join and, when the launcher started
// them, their processes, which are stopped when this goes away (on every path out of Serve).
struct RankProcesses {
  RankProcesses() = default;
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;
  ~RankProcesses() { StopChildren(pids); }

  std::unique_ptr<WorkerPlane> plane;  // removes the run directory when it goes away
  bool spawned = false;
  std::vector<pid_t> pids;  // the spawned ranks still running
};

// Step 1, spawn: the worker control plane, then the ranks as children of `worker_bin`, or
// (worker_bin empty) the command that joins one from elsewhere. SIGCHLD must already be
// blocked, so that no child's exit is missed.
absl::Status SpawnRanks(const std::string& worker_bin, int ranks, RankProcesses* procs) {
  procs->spawned = !worker_bin.empty();
  WorkerPlaneOptions plane_options;
  plane_options.ranks = ranks;
  plane_options.spawn_ranks = procs->spawned;
  plane_options.worker_listen = absl::GetFlag(FLAGS_worker_listen);
  plane_options.cluster_secret_file = absl::GetFlag(FLAGS_cluster_secret_file);
  absl::StatusOr<std::unique_ptr<WorkerPlane>> plane_or = StartWorkerPlane(plane_options);
  if (!plane_or.ok()) return plane_or.status();
  procs->plane = *std::move(plane_or);
  const WorkerPlane& plane = *procs->plane;
  if (!procs->spawned) {
    std::fprintf(stderr,
                 "launch: worker control plane on %s; waiting up to %d s for %d rank(s) to "
                 "join: worker --coordinator=%s --rank=R --cluster_secret_file=%s\n",
                 plane.listen_address.c_str(), absl::GetFlag(FLAGS_join_timeout_s), ranks,
                 plane.listen_address.c_str(), plane.secret_file.c_str());
    return absl::OkStatus();
  }
  for (int r = 0; r < ranks; ++r) {
    procs->pids.push_back(SpawnWorker(worker_bin, plane.local_address, r, plane.secret_file));
    g_rank_of_pid[procs->pids.back()] = r;
  }
  std::fprintf(stderr, "launch: started %d worker rank(s) (pids", ranks);
  for (pid_t p : procs->pids) std::fprintf(stderr, " %d", p);
  std::fprintf(stderr, ")\n");
  return absl::OkStatus();
}

// Step 2, join: every rank has registered with the control plane (or one died, or the join
// timed out).
absl::StatusOr<std::vector<JoinedRank>> JoinRanks(const RankProcesses& procs) {
  const bool spawned = procs.spawned;
  absl::StatusOr<std::vector<JoinedRank>> joined = procs.plane->control->WaitForRanks(
      absl::Seconds(absl::GetFlag(FLAGS_join_timeout_s)),
      [spawned](const JoinedRank& r) {
        if (!spawned) {
          std::fprintf(stderr, "launch: rank %d joined from %s (host %s)\n", r.rank,
                       r.worker_address.c_str(), r.hostname.c_str());
        }
      },
      [&procs] { return SpawnedRanksAlive(procs.pids); });
  if (!joined.ok()) {
    return absl::Status(joined.status().code(),
                        absl::StrCat("worker control plane on ", procs.plane->listen_address,
                                     ": ", joined.status().message()));
  }
  return joined;
}

// Step 3, load: the joined ranks load `load`, their shards and KV caches; progress is printed.
absl::StatusOr<std::unique_ptr<RemoteExecutor>> LoadRanks(
    const LaunchSetup& setup, const RankLoad& load, const RankProcesses& procs,
    const std::vector<JoinedRank>& joined) {
  std::vector<std::string> addresses;
  for (const JoinedRank& r : joined) addresses.push_back(r.worker_address);
  RemoteExecutorOptions exec_options;
  exec_options.cluster_secret = procs.plane->secret;
  exec_options.backend = setup.backend;
  exec_options.comm_kind = setup.comm_kind;
  // Ranks on this host (children, or joined with this host's name and boot id) take their
  // steps through shared memory; ranks elsewhere over gRPC.
  exec_options.step_channel = procs.spawned || AllOnThisHost(joined);
  // Ranks meet through the control plane's store (rendezvous_dir ""), fresh for this launch;
  // the prefix also names this run's shared-memory segments.
  exec_options.rendezvous_dir = "";
  exec_options.rendezvous_prefix = absl::StrCat("run", getpid(), "-", NewClusterSecret().substr(0, 8));
  const absl::Time load_start = absl::Now();
  return RemoteExecutor::Connect(
      addresses, load, exec_options, [&](const tpserve::worker::v1::LoadProgress& p) {
        if (p.ready()) {
          std::fprintf(stderr,
                       "launch: rank %d ready: weights %s B (%.1f MiB), KV cache %.1f MiB "
                       "(%.1f s)\n",
                       p.rank(), WithThousands(p.weight_bytes()).c_str(),
                       p.weight_bytes() / 1048576.0, p.kv_cache_bytes() / 1048576.0,
                       absl::ToDoubleSeconds(absl::Now() - load_start));
          if (p.draft_weight_bytes() > 0) {
            std::fprintf(stderr, "launch: rank %d draft model: weights %.1f MiB, KV cache %.1f MiB\n",
                         p.rank(), p.draft_weight_bytes() / 1048576.0,
                         p.draft_kv_cache_bytes() / 1048576.0);
          }
        } else {
          std::fprintf(stderr, "launch: rank %d loading its shard of %d layers...\n", p.rank(),
                       p.num_layers());
        }
      });
}

// Step 4, serve: the public gRPC and HTTP APIs over the loaded ranks, announced on stdout (and
// in --ready_file).
absl::StatusOr<std::unique_ptr<Gateway>> StartServing(const LaunchSetup& setup,
                                                      GatewayOptions options,
                                                      std::unique_ptr<RemoteExecutor> exec) {
  const ClusterPlan& plan = setup.plan;
  const ModelBundle& bundle = *setup.bundle;
  options.engine = plan.engine;
  options.engine.enable_prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  options.engine.eos_token_ids = bundle.EosTokenIds();
  options.engine.jump_forward = absl::GetFlag(FLAGS_jump_forward);
  if (absl::GetFlag(FLAGS_tool_call_parser).empty() && bundle.chat_template.has_value()) {
    options.frontend.output_formats.tool_calls =
        DetectToolCallFormat(bundle.chat_template->tool_call_source())
            .value_or(ToolCallFormat::kHermes);
  }
  options.info.name = absl::GetFlag(FLAGS_served_model_name).empty()
                          ? bundle.files.config.name
                          : absl::GetFlag(FLAGS_served_model_name);
  options.info.weight_format =
      plan.formats.preset == "checkpoint" ? bundle.files.weight_format : plan.formats.preset;
  options.info.backend = setup.backend;
  options.info.tensor_parallel_degree = setup.ranks;
  options.info.num_parameters = bundle.files.config.NumParameters();
  options.info.kv_cache_tokens = int64_t{plan.num_kv_blocks} * plan.block_size_tokens;
  RemoteExecutor* remote = exec.get();
  options.ranks_alive = [remote] { return remote->Ping(absl::Seconds(1)); };
  std::unique_ptr<Proposer> proposer;  // prompt lookup needs none: the engine makes it
  if (plan.memory.inputs.draft.has_value()) {
    DraftModelOptions draft;
    draft.max_step_tokens = plan.engine.scheduler.max_tokens_per_step;
    draft.max_logit_rows = plan.memory.inputs.draft->max_sequences_per_step;
    proposer = std::make_unique<DraftModelProposer>(remote->DraftExecutor(), draft);
  }
  if (plan.engine.speculative.method != SpeculativeMethod::kOff) {
    std::fprintf(stderr, "launch: speculative decoding: %s, K up to %d%s, none above %d decoding\n",
                 SpeculativeMethodName(plan.engine.speculative.method),
                 plan.engine.speculative.num_speculative_tokens,
                 plan.engine.speculative.adaptive ? " (adaptive)" : "",
                 plan.engine.speculative.max_batch);
  }
  absl::StatusOr<std::unique_ptr<Gateway>> started =
      Gateway::Start(setup.bundle, std::move(exec), options, std::move(proposer));
  if (!started.ok()) return started.status();
  std::unique_ptr<Gateway> gateway = *std::move(started);
  for (const std::string& w : gateway->warnings()) {
    std::fprintf(stderr, "launch: WARNING: %s\n", w.c_str());
  }
  std::printf("tpserve: serving %s on %s (tpserve.v1.TpServe, %d %s rank(s))\n",
              bundle.files.config.name.c_str(), gateway->address().c_str(), setup.ranks,
              setup.backend.c_str());
  if (!gateway->http_url().empty()) {
    std::printf("tpserve: OpenAI-compatible HTTP on %s (/v1/chat/completions, /v1/completions, "
                "/v1/models, /health, /metrics)\n", gateway->http_url().c_str());
  }
  std::fflush(stdout);
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    const std::string tmp = absl::GetFlag(FLAGS_ready_file) + ".tmp";
    std::ofstream(tmp) << gateway->address() << "\n" << gateway->http_url() << "\n";
    std::rename(tmp.c_str(), absl::GetFlag(FLAGS_ready_file).c_str());
  }
  return gateway;
}

// --demo_prompt: one streamed chat request through the public API, on its own thread.
std::thread StartDemo(const std::string& address, const GatewayOptions& options) {
  const std::string prompt = absl::GetFlag(FLAGS_demo_prompt);
  if (prompt.empty()) return std::thread();
  if (options.tls.enabled()) {
    std::fprintf(stderr, "launch: --demo_prompt skipped: the demo client speaks plaintext and the "
                         "ports are on TLS (try //deploy:client --tls_ca_file=...)\n");
    return std::thread();
  }
  return std::thread([prompt, address, token = options.frontend.bearer_token] {
    StreamClientOptions demo_options;
    demo_options.max_new_tokens = 128;
    demo_options.bearer_token = token;
    absl::Status s = StreamChat(address, prompt, demo_options, stdout);
    if (!s.ok()) std::fprintf(stderr, "launch: demo request failed: %s\n", std::string(s.message()).c_str());
  });
}

// Reaps the children that exited or stopped; returns how many. Each is named on stderr.
int ReapRanks(std::vector<pid_t>* pids) {
  int reaped = 0;
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
    const int rank = g_rank_of_pid.count(pid) ? g_rank_of_pid[pid] : -1;
    std::string how;
    if (WIFSTOPPED(status)) {
      how = absl::StrCat("was stopped by signal ", WSTOPSIG(status), " (", strsignal(WSTOPSIG(status)), ")");
    } else if (WIFSIGNALED(status)) {
      how = absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
      pids->erase(std::remove(pids->begin(), pids->end(), pid), pids->end());
    } else {
      how = absl::StrCat("exited with status ", WEXITSTATUS(status));
      pids->erase(std::remove(pids->begin(), pids->end(), pid), pids->end());
    }
    std::fprintf(stderr, "launch: rank %d (pid %d) %s; the cluster is NOT_SERVING\n", rank, pid,
                 how.c_str());
    ++reaped;
  }
  return reaped;
}

// On SIGINT or SIGTERM, drain: NOT_SERVING, and the requests in flight get up to
// --drain_timeout_s to finish before they are cancelled.
void Drain(Gateway& gateway, int sig) {
  const int timeout_s = absl::GetFlag(FLAGS_drain_timeout_s);
  std::fprintf(stderr, "launch: %s; draining (NOT_SERVING; %lld request(s) in flight may run "
               "for up to %d s)\n", sig == SIGINT ? "interrupted" : "terminated",
               static_cast<long long>(gateway.frontend().in_flight()), timeout_s);
  const int64_t cancelled = gateway.Drain(absl::Seconds(timeout_s));
  std::fprintf(stderr, "launch: drained (%lld request(s) cancelled at the timeout); shutting down\n",
               static_cast<long long>(cancelled));
}

// Step 5, supervise: serve until a signal (then drain) or until the cluster stops serving. A
// rank that died or stalled cannot be replaced in place, so the launcher says which and how,
// lets the requests in flight end with UNAVAILABLE naming it, and returns 1 promptly for a
// supervisor to restart it. Returns the exit code.
int Supervise(Gateway& gateway, const sigset_t& signals, std::vector<pid_t>* pids) {
  int exit_code = 0;
  absl::Time failed_at = absl::InfiniteFuture();        // when a rank was seen dead or stopped
  absl::Time unhealthy_since = absl::InfiniteFuture();  // heartbeats failing since
  while (true) {
    const struct timespec tick = {0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGCHLD) {
      if (ReapRanks(pids) > 0) {
        exit_code = 1;
        failed_at = std::min(failed_at, absl::Now());
      }
      continue;
    }
    if (sig == SIGINT || sig == SIGTERM) {
      Drain(gateway, sig);
      return exit_code;
    }
    // A tick: a failed step or heartbeat also means a rank is gone (or stalled without a
    // signal reaching us, e.g. on another host). A failed step is final; a missed heartbeat
    // (the health monitor's ping) may be a busy host, so it must last a few seconds.
    const absl::Status step = gateway.engine().health();
    const absl::Status ping = gateway.last_health_error();
    unhealthy_since = ping.ok() ? absl::InfiniteFuture() : std::min(unhealthy_since, absl::Now());
    const absl::Status health =
        !step.ok() ? step
                   : (absl::Now() - unhealthy_since > absl::Seconds(3) ? ping : absl::OkStatus());
    if (!health.ok()) {
      std::fprintf(stderr, "launch: the cluster is NOT_SERVING: %s; exiting 1 so that a "
                   "supervisor restarts it\n", std::string(health.message()).c_str());
      return 1;
    }
    // A rank seen dead before any step or heartbeat noticed: give them a moment to name it.
    if (absl::Now() - failed_at > absl::Seconds(5)) {
      std::fprintf(stderr, "launch: exiting 1 so that a supervisor restarts the cluster\n");
      return exit_code;
    }
  }
}

// Prints the engine's per-step figures, then closes the public API (ending any open stream).
void StopServing(Gateway& gateway) {
  const EngineStats st = gateway.engine().stats();
  if (st.steps > 0) {
    const double ms = 1000.0 / static_cast<double>(st.steps);
    std::fprintf(stderr,
                 "launch: %lld steps, %lld tokens; per step: %.2f ms wall, rank-0 model %.2f ms "
                 "(collectives %.2f ms), control plane %.2f ms\n",
                 static_cast<long long>(st.steps), static_cast<long long>(st.tokens_computed),
                 st.step_wall_s * ms, st.execute_s * ms, st.allreduce_s * ms,
                 (st.step_wall_s - st.execute_s) * ms);
  }
  gateway.Shutdown();
}

// What the flags ask of the processes and the public API is checked first (exit 2, nothing
// started); then spawn, join, load, serve, supervise (drain on a signal), stop. Returns the
// exit code.
int Serve(const char* argv0, const LaunchSetup& setup) {
  const std::string worker_bin = absl::GetFlag(FLAGS_spawn_ranks) ? FindWorkerBinary(argv0) : "";
  if (absl::GetFlag(FLAGS_spawn_ranks) && worker_bin.empty()) {
    return Fail("cannot find the worker binary (set TPSERVE_WORKER_BIN)");
  }
  absl::StatusOr<RankLoad> load = RankLoadFor(setup.plan, setup.request);
  if (!load.ok()) return Fail(std::string(load.status().message()), 2);
  absl::StatusOr<GatewayOptions> options = PublicApiOptions();
  if (!options.ok()) return Fail(std::string(options.status().message()), 2);

  // Signals go to one thread (sigwait) so that no handler runs in the middle of anything.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  sigprocmask(SIG_BLOCK, &signals, nullptr);

  RankProcesses procs;  // declared first: its ranks are stopped after everything else
  if (absl::Status s = SpawnRanks(worker_bin, setup.ranks, &procs); !s.ok()) {
    return Fail(std::string(s.message()), 2);
  }
  absl::StatusOr<std::vector<JoinedRank>> joined = JoinRanks(procs);
  if (!joined.ok()) return Fail(std::string(joined.status().message()));
  absl::StatusOr<std::unique_ptr<RemoteExecutor>> exec =
      LoadRanks(setup, *load, procs, *joined);
  if (!exec.ok()) return Fail(std::string(exec.status().message()));
  RemoteExecutor* remote = exec->get();
  absl::StatusOr<std::unique_ptr<Gateway>> gateway =
      StartServing(setup, *options, *std::move(exec));
  if (!gateway.ok()) return Fail(std::string(gateway.status().message()));
  std::thread demo = StartDemo((*gateway)->address(), *options);
  const int exit_code = Supervise(**gateway, signals, &procs.pids);
  StopServing(**gateway);
  if (demo.joinable()) demo.join();
  if (!procs.spawned) remote->ShutdownRanks();  // ranks elsewhere exit too (best effort)
  return exit_code;  // ~RankProcesses stops the children; its plane removes the run directory
}

// --gpus=N: plan the model on N GPUs, say what is missing (devices, a checkpoint) with the
// plan in hand, or start N CUDA ranks joined by NCCL.
int GpuMain(const char* argv0) {
  const int gpus = absl::GetFlag(FLAGS_gpus);
  if (gpus > 64) return Fail(absl::StrCat("--gpus = ", gpus, " must be in [1, 64]"), 2);
  absl::StatusOr<DType> kv_dtype = KvDtypeFlag(/*gpu=*/true);
  if (!kv_dtype.ok()) return Fail(std::string(kv_dtype.status().message()), 2);
  // The model: a checkpoint path, or a shape preset such as "405b-fp8" (shape, then weights).
  const std::string model = absl::GetFlag(FLAGS_model);
  std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  std::string weights = absl::GetFlag(FLAGS_weights);
  absl::StatusOr<ModelSpec> config = absl::NotFoundError("");
  WeightFormats formats;
  std::optional<ModelBundle> bundle;
  if (checkpoint.empty() && std::filesystem::exists(model)) checkpoint = model;
  if (!std::filesystem::exists(model)) {
    const size_t dash = model.find('-');
    config = ModelSpecPreset(model.substr(0, dash));
    if (!config.ok()) return Fail(std::string(config.status().message()), 2);
    if (weights.empty()) weights = dash == std::string::npos ? "bf16" : model.substr(dash + 1);
    absl::StatusOr<WeightFormats> preset = WeightFormatsPreset(weights);
    if (!preset.ok()) return Fail(absl::StrCat("--model=", model, ": ", preset.status().message()), 2);
    formats = *preset;
    FitInt4Groups(*config, gpus, &formats);
  }
  if (!checkpoint.empty()) {
    absl::StatusOr<ModelBundle> loaded = LoadModelBundle(checkpoint, BundleOptions());
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    bundle.emplace(*std::move(loaded));
    if (config.ok() && !SameShape(*config, bundle->files.config)) {
      return Fail(absl::StrCat("--checkpoint=", checkpoint, " holds ", bundle->files.config.name,
                               ", not the ", config->name, " shape --model names"), 2);
    }
    config = bundle->files.config;
    absl::StatusOr<WeightFormats> held = ResolveWeightFormats(
        bundle->files.stored_formats, weights, bundle->files.config, gpus);
    if (!held.ok()) return Fail(std::string(held.status().message()), 2);
    formats = *held;
  }
  ClusterRequest want;
  want.context_tokens = absl::GetFlag(FLAGS_context);
  want.max_seqs = absl::GetFlag(FLAGS_max_seqs);
  want.kv_dtype = *kv_dtype;
  want.deterministic_tp = absl::GetFlag(FLAGS_deterministic_tp);
  RankFlags(want);
  if (absl::Status s = SpeculationFlags(gpus, want); !s.ok()) {
    return Fail(std::string(s.message()), 2);
  }
  // The GPUs found here, else the product's (or --gpu's): the plan is printed either way.
  const absl::StatusOr<GpuTarget> target =
      ChooseGpuTarget(absl::GetFlag(FLAGS_gpu), gpus, VisibleCudaDevices());
  if (!target.ok()) return Fail(std::string(target.status().message()), 2);
  absl::StatusOr<MemoryPlan> memory = PlanGpus(*config, formats, gpus, target->spec, want);
  if (!memory.ok()) return Fail(std::string(memory.status().message()), 2);
  std::fprintf(stderr, "%s", RenderPlanTable(*memory, EstimateRoofline(*memory, {})).c_str());
  if (const std::string missing = MissingDevicesLine(*target, gpus); !missing.empty()) {
    return Fail(missing, 2);
  }
  if (!bundle.has_value()) {
    return Fail(absl::StrCat(
                    "--model=", model, " names a shape, not weights: pass --checkpoint=DIR, a "
                    "Hugging Face Llama directory with that shape (config.json and safetensors; ",
                    weights == "fp8" ? "for fp8, e.g. Meta's Llama-3.1-*-FP8 (fbgemm_fp8) or a "
                                       "compressed-tensors FP8 export, or any bf16 checkpoint "
                                       "quantized on load with --weights=fp8)"
                                     : "stored as it is, or quantized on load with --weights)"),
                2);
  }
  absl::StatusOr<ClusterPlan> plan = GpuClusterPlan(*std::move(memory), want);
  if (!plan.ok()) return Fail(std::string(plan.status().message()), 2);
  std::fprintf(stderr, "%s", plan->summary.c_str());
  want.model_path = checkpoint;
  want.weights = absl::GetFlag(FLAGS_weights);  // as the ranks were always sent it
  LaunchSetup setup;
  setup.bundle = &*bundle;
  setup.request = std::move(want);
  setup.plan = *std::move(plan);
  setup.ranks = gpus;
  setup.backend = "cuda";
  setup.comm_kind = "nccl";
  return Serve(argv0, setup);
}

int Main(const char* argv0) {
  return absl::GetFlag(FLAGS_gpus) > 0 ? GpuMain(argv0) : CpuMain(argv0);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Launch a tensor-parallel tpserve cluster on this machine.");
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main(argv[0]);
}
