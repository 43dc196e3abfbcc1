// The launcher's last step, serve (flags -> plan -> serve: deploy/launch_main.cc): spawn the
// ranks (or wait for them to join from elsewhere), join, load, serve the public APIs, supervise
// (drain on a signal, exit 1 naming a rank that died or stalled), stop.
#include "deploy/serve.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
#include "deploy/launch_flags.h"
#include "deploy/stream_client.h"
#include "deploy/worker_plane.h"
#include "planner/plan_report.h"

namespace tpserve {
namespace {

// The spawned ranks' pids: written at spawn and by a replacement (on the engine's thread),
// read when a child exits (the supervising thread).
absl::Mutex g_procs_mu;
std::map<pid_t, int> g_rank_of_pid ABSL_GUARDED_BY(g_procs_mu);

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
  // Everything the child needs is made before the fork: other threads may hold the allocator.
  const std::string coordinator_flag = "--coordinator=" + coordinator;
  const std::string rank_flag = absl::StrCat("--rank=", rank);
  const std::string secret_flag = "--cluster_secret_file=" + secret_file;
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
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

// The parsers' name errors already quote the value and list the valid names.
absl::Status FlagError(const char* flag, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", status.message()));
}

// The public API's options from the flags: address, admission, TLS, bearer token, reflection.
absl::StatusOr<GatewayOptions> PublicApiOptions(const LaunchFlags& flags) {
  GatewayOptions options;
  options.listen = absl::StrCat(flags.listen, ":", flags.port);
  const int queued = flags.max_queued_requests;
  if (queued < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_queued_requests = ", queued, " must be at least 0"));
  }
  if (flags.drain_timeout_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--drain_timeout_s = ", flags.drain_timeout_s, " must be at least 0"));
  }
  if (flags.rank_replace_timeout_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--rank_replace_timeout_s = ",
                                                   flags.rank_replace_timeout_s,
                                                   " must be at least 0 (0: no replacement)"));
  }
  options.frontend.max_queued_requests = queued;
  if (const std::string name = flags.tool_call_parser; !name.empty()) {
    absl::StatusOr<ToolCallFormat> format = ParseToolCallFormatName(name);
    if (!format.ok()) return FlagError("--tool_call_parser", format.status());
    options.frontend.output_formats.tool_calls = *format;  // else set from the model's template
  }
  if (const std::string name = flags.reasoning_parser; !name.empty()) {
    absl::StatusOr<ReasoningFormat> format = ParseReasoningFormatName(name);
    if (!format.ok()) return FlagError("--reasoning_parser", format.status());
    options.frontend.output_formats.reasoning = *format;
  }
  if (flags.structured_output) {
    ConstraintLimits limits;
    const int timeout_ms = flags.structured_compile_timeout_ms;
    const int max_bytes = flags.structured_max_constraint_bytes;
    if (timeout_ms < 1 || max_bytes < 1 || flags.structured_max_grammar_bytes < 1 ||
        flags.structured_cache_bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--structured_compile_timeout_ms = ", timeout_ms, ", --structured_max_constraint_bytes = ",
          max_bytes, " and --structured_max_grammar_bytes = ",
          flags.structured_max_grammar_bytes,
          " must be at least 1, --structured_cache_bytes at least 0"));
    }
    limits.compile_timeout = absl::Milliseconds(timeout_ms);
    limits.max_text_bytes = max_bytes;
    limits.max_compiled_bytes = flags.structured_max_grammar_bytes;
    limits.cache_bytes = flags.structured_cache_bytes;
    options.structured = limits;
  } else {
    options.structured.reset();
  }
  options.http_port = flags.http_port;
  options.http_threads = flags.http_threads;
  if (options.http_port < 0 || options.http_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_port = ", options.http_port, " must be in [0, 65535] (0 = off)"));
  }
  if (options.http_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_threads = ", options.http_threads, " must be at least 1"));
  }
  options.tls.cert_file = flags.tls_cert_file;
  options.tls.key_file = flags.tls_key_file;
  options.tls.client_ca_file = flags.tls_client_ca_file;
  const std::string token_file = flags.auth_token_file;
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
  const std::string reflection = flags.reflection;
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
  std::string worker_bin;   // what spawned them (and spawns a successor)
  std::vector<pid_t> pids;  // the spawned ranks still running (g_procs_mu once serving)
};

// Whether a lost rank is replaced in place (--rank_replace_timeout_s; GPU ranks only when it
// is given: the default suits a CPU shard's load, not a GPU's).
bool ReplacesRanks(const LaunchSetup& setup) {
  return setup.flags.rank_replace_timeout_s > 0 &&
         (setup.backend == "cpu" || setup.flags.rank_replace_timeout_given);
}

// RemoteExecutorOptions::replace_rank: a successor for rank `rank` (spawned here, after any
// predecessor still running is killed, or awaited from elsewhere), once it has joined.
absl::StatusOr<std::string> ReplaceRank(RankProcesses* procs, int rank, absl::Duration timeout) {
  WorkerPlane& plane = *procs->plane;
  plane.control->Vacate(rank);
  pid_t successor = -1;
  if (procs->spawned) {
    absl::MutexLock lock(&g_procs_mu);
    for (pid_t pid : procs->pids) {
      if (g_rank_of_pid[pid] == rank) kill(pid, SIGKILL);  // stalled, not dead: it goes
    }
    successor = SpawnWorker(procs->worker_bin, plane.local_address, rank, plane.secret_file);
    procs->pids.push_back(successor);
    g_rank_of_pid[successor] = rank;
    std::fprintf(stderr, "launch: rank %d is gone; started its successor (pid %d)\n", rank,
                 successor);
  } else {
    std::fprintf(stderr,
                 "launch: rank %d is gone; waiting up to %s for a successor: worker "
                 "--coordinator=%s --rank=%d --cluster_secret_file=%s\n",
                 rank, absl::FormatDuration(timeout).c_str(), plane.listen_address.c_str(), rank,
                 plane.secret_file.c_str());
  }
  absl::StatusOr<JoinedRank> joined =
      plane.control->WaitForRejoin(rank, timeout, [procs, successor]() -> absl::Status {
        if (successor < 0) return absl::OkStatus();
        absl::MutexLock lock(&g_procs_mu);
        if (std::find(procs->pids.begin(), procs->pids.end(), successor) == procs->pids.end()) {
          return absl::UnavailableError(
              absl::StrCat("its successor (pid ", successor, ") exited before it joined"));
        }
        return absl::OkStatus();
      });
  if (!joined.ok()) return joined.status();
  std::fprintf(stderr, "launch: rank %d's successor joined from %s; loading its shard\n", rank,
               joined->worker_address.c_str());
  return joined->worker_address;
}

// Step 1, spawn: the worker control plane, then the ranks as children of `worker_bin`, or
// (worker_bin empty) the command that joins one from elsewhere. SIGCHLD must already be
// blocked, so that no child's exit is missed.
absl::Status SpawnRanks(const LaunchFlags& flags, const std::string& worker_bin, int ranks,
                        RankProcesses* procs) {
  procs->spawned = !worker_bin.empty();
  WorkerPlaneOptions plane_options;
  plane_options.ranks = ranks;
  plane_options.spawn_ranks = procs->spawned;
  plane_options.worker_listen = flags.worker_listen;
  plane_options.cluster_secret_file = flags.cluster_secret_file;
  absl::StatusOr<std::unique_ptr<WorkerPlane>> plane_or = StartWorkerPlane(plane_options);
  if (!plane_or.ok()) return plane_or.status();
  procs->plane = *std::move(plane_or);
  const WorkerPlane& plane = *procs->plane;
  if (!procs->spawned) {
    std::fprintf(stderr,
                 "launch: worker control plane on %s; waiting up to %d s for %d rank(s) to "
                 "join: worker --coordinator=%s --rank=R --cluster_secret_file=%s\n",
                 plane.listen_address.c_str(), flags.join_timeout_s, ranks,
                 plane.listen_address.c_str(), plane.secret_file.c_str());
    return absl::OkStatus();
  }
  absl::MutexLock lock(&g_procs_mu);
  for (int r = 0; r < ranks; ++r) {
    procs->pids.push_back(SpawnWorker(worker_bin, plane.local_address, r, plane.secret_file));
    g_rank_of_pid[procs->pids.back()] = r;
  }
  std::fprintf(stderr, "launch: started %d worker rank(s) (pids", ranks);
  for (pid_t p : procs->pids) std::fprintf(stderr, " %d", p);
  std::fprintf(stderr, ")\n");
  return absl::OkStatus();
}

// CANCELLED naming the signal if SIGINT or SIGTERM is pending (blocked, as Serve keeps them
// until Supervise waits for them), which it takes; OK otherwise. SIGCHLD stays pending.
absl::Status StopSignalPending(const char* waiting_for) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  const struct timespec now = {0, 0};
  const int sig = sigtimedwait(&stop, nullptr, &now);
  if (sig != SIGINT && sig != SIGTERM) return absl::OkStatus();
  return absl::CancelledError(absl::StrCat(sig == SIGINT ? "interrupted" : "terminated",
                                           " while waiting for ", waiting_for));
}

// Step 2, join: every rank has registered with the control plane (or one died, the join timed
// out, or the launcher was told to stop).
absl::StatusOr<std::vector<JoinedRank>> JoinRanks(const LaunchFlags& flags,
                                                  const RankProcesses& procs) {
  const bool spawned = procs.spawned;
  absl::StatusOr<std::vector<JoinedRank>> joined = procs.plane->control->WaitForRanks(
      absl::Seconds(flags.join_timeout_s),
      [spawned](const JoinedRank& r) {
        if (!spawned) {
          std::fprintf(stderr, "launch: rank %d joined from %s (host %s)\n", r.rank,
                       r.worker_address.c_str(), r.hostname.c_str());
        }
      },
      [&procs] {
        TP_RETURN_IF_ERROR(StopSignalPending("the ranks to join"));
        return SpawnedRanksAlive(procs.pids);
      });
  if (!joined.ok()) {
    return absl::Status(joined.status().code(),
                        absl::StrCat("worker control plane on ", procs.plane->listen_address,
                                     ": ", joined.status().message()));
  }
  return joined;
}

// Step 3, load: the joined ranks load `load`, their shards and KV caches; progress is printed.
absl::StatusOr<std::unique_ptr<RemoteExecutor>> LoadRanks(
    const LaunchSetup& setup, const RankLoad& load, RankProcesses& procs,
    const std::vector<JoinedRank>& joined) {
  std::vector<std::string> addresses;
  for (const JoinedRank& r : joined) addresses.push_back(r.worker_address);
  RemoteExecutorOptions exec_options;
  exec_options.cluster_secret = procs.plane->secret;
  exec_options.backend = setup.backend;
  exec_options.comm_kind = setup.comm_kind;
  if (ReplacesRanks(setup)) {
    exec_options.rank_replace_timeout = absl::Seconds(setup.flags.rank_replace_timeout_s);
    exec_options.replace_rank = [procs = &procs](int rank, absl::Duration timeout) {
      return ReplaceRank(procs, rank, timeout);
    };
  }
  // GPU ranks: each takes the next GPU of its own host (pipeline stages on other hosts start
  // from GPU 0 there).
  if (setup.backend == "cuda") exec_options.device_ordinals = DeviceOrdinalsByHost(joined);
  // Ranks on this host (children, or joined with this host's name and boot id) take their
  // steps through shared memory; ranks elsewhere over gRPC.
  exec_options.step_channel = procs.spawned || AllOnThisHost(joined);
  // Ranks meet through the control plane's store (rendezvous_dir ""), fresh for this launch;
  // the prefix also names this run's shared-memory segments.
  exec_options.rendezvous_dir = "";
  exec_options.rendezvous_prefix = absl::StrCat("run", getpid(), "-", NewClusterSecret().substr(0, 8));
  exec_options.keep_loading = [] { return StopSignalPending("the ranks to load"); };
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
  const LaunchFlags& flags = setup.flags;
  const ClusterPlan& plan = setup.plan;
  const ModelBundle& bundle = *setup.bundle;
  options.engine = plan.engine;
  options.engine.enable_prefix_caching = flags.prefix_caching;
  options.engine.eos_token_ids = bundle.EosTokenIds();
  options.engine.jump_forward = flags.jump_forward;
  if (flags.tool_call_parser.empty() && bundle.chat_template.has_value()) {
    options.frontend.output_formats.tool_calls =
        DetectToolCallFormat(bundle.chat_template->tool_call_source())
            .value_or(ToolCallFormat::kHermes);
  }
  options.info.name = flags.served_model_name.empty()
                          ? bundle.files.config.name
                          : flags.served_model_name;
  options.info.weight_format =
      plan.formats.preset == "checkpoint" ? bundle.files.weight_format : plan.formats.preset;
  options.info.backend = setup.backend;
  options.info.tensor_parallel_degree = setup.request.ranks;
  options.info.num_parameters = bundle.files.config.NumParameters();
  options.info.kv_cache_tokens = int64_t{plan.num_kv_blocks} * plan.block_size_tokens;
  RemoteExecutor* remote = exec.get();
  options.ranks_alive = [remote] { return remote->Ping(absl::Seconds(1)); };
  std::unique_ptr<Proposer> proposer;  // prompt lookup needs none: the engine makes it
  if (plan.memory.inputs.draft.has_value()) {
    DraftModelOptions draft;
    draft.max_tokens_per_step = plan.engine.scheduler.max_tokens_per_step;
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
  if (!flags.ready_file.empty()) {
    const std::string tmp = flags.ready_file + ".tmp";
    std::ofstream(tmp) << gateway->address() << "\n" << gateway->http_url() << "\n";
    std::rename(tmp.c_str(), flags.ready_file.c_str());
  }
  return gateway;
}

// --demo_prompt: one streamed chat request through the public API, on its own thread.
std::thread StartDemo(const LaunchFlags& flags, const std::string& address,
                      const GatewayOptions& options) {
  const std::string prompt = flags.demo_prompt;
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
int ReapRanks(std::vector<pid_t>* pids, bool replaced, std::vector<int>* gone) {
  int reaped = 0;
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
    absl::MutexLock lock(&g_procs_mu);
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
    std::fprintf(stderr, "launch: rank %d (pid %d) %s; %s\n", rank, pid, how.c_str(),
                 replaced ? "replacing it in place" : "the cluster is NOT_SERVING");
    if (rank >= 0) gone->push_back(rank);
    ++reaped;
  }
  return reaped;
}

// On SIGINT or SIGTERM, drain: NOT_SERVING, and the requests in flight get up to
// --drain_timeout_s to finish before they are cancelled.
void Drain(const LaunchFlags& flags, Gateway& gateway, int sig) {
  const int timeout_s = flags.drain_timeout_s;
  std::fprintf(stderr, "launch: %s; draining (NOT_SERVING; %lld request(s) in flight may run "
               "for up to %d s)\n", sig == SIGINT ? "interrupted" : "terminated",
               static_cast<long long>(gateway.frontend().in_flight()), timeout_s);
  const int64_t cancelled = gateway.Drain(absl::Seconds(timeout_s));
  std::fprintf(stderr, "launch: drained (%lld request(s) cancelled at the timeout); shutting down\n",
               static_cast<long long>(cancelled));
}

// Step 5, supervise: serve until a signal (then drain) or until the cluster stops serving.
// With `replace` (ReplacesRanks) a rank that died or stopped answering is replaced in place
// (Engine::RecoverNow, or the step that failed on it; RemoteExecutor::Recover); the cluster
// stops only when that fails. Without it, or when it fails, the launcher says which rank and
// how, lets the requests in flight end with UNAVAILABLE naming it, and returns 1 promptly for
// a supervisor to restart the cluster. Returns the exit code.
int Supervise(const LaunchFlags& flags, Gateway& gateway, const sigset_t& signals,
              std::vector<pid_t>* pids, bool replace, RemoteExecutor* remote) {
  int exit_code = 0;
  absl::Time failed_at = absl::InfiniteFuture();        // when a rank was seen dead or stopped
  absl::Time unhealthy_since = absl::InfiniteFuture();  // heartbeats failing since
  while (true) {
    const struct timespec tick = {0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGCHLD) {
      std::vector<int> gone;
      if (ReapRanks(pids, replace, &gone) > 0) {
        if (replace) {
          // A step waiting on it stops waiting now; one may not come for a while (idle):
          // replace it now.
          for (int rank : gone) remote->RankGone(rank);
          gateway.engine().RecoverNow();
        } else {
          exit_code = 1;
          failed_at = std::min(failed_at, absl::Now());
        }
      }
      continue;
    }
    if (sig == SIGINT || sig == SIGTERM) {
      Drain(flags, gateway, sig);
      return exit_code;
    }
    // A tick: a failed step or heartbeat also means a rank is gone (or stalled without a
    // signal reaching us, e.g. on another host). A failed step is final; a missed heartbeat
    // (the health monitor's ping) may be a busy host, so it must last a few seconds.
    const absl::Status step = gateway.engine().health();
    const absl::Status ping = gateway.last_health_error();
    unhealthy_since = ping.ok() ? absl::InfiniteFuture() : std::min(unhealthy_since, absl::Now());
    if (replace && step.ok() && !ping.ok()) {
      // A rank stopped answering: being replaced, or to be (a rank gone on another host).
      if (!gateway.engine().recovering() && absl::Now() - unhealthy_since > absl::Seconds(3)) {
        gateway.engine().RecoverNow();
        unhealthy_since = absl::Now();
      }
      continue;
    }
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
    if (!st.expert_load.empty()) {
      std::fprintf(stderr, "launch: experts: busiest over mean %.2f (mean over %lld MoE layer "
                           "runs)\n",
                   st.expert_load.Imbalance(), static_cast<long long>(st.expert_load.layers));
    }
  }
  gateway.Shutdown();
}

}  // namespace

int LaunchFail(const std::string& message, int code) {
  std::fprintf(stderr, "launch: %s\n", message.c_str());
  return code;
}

// What the flags ask of the processes and the public API is checked first (exit 2, nothing
// started); then spawn, join, load, serve, supervise (drain on a signal), stop. Returns the
// exit code.
int Serve(const char* argv0, const LaunchSetup& setup) {
  const LaunchFlags& flags = setup.flags;
  const std::string worker_bin = flags.spawn_ranks ? FindWorkerBinary(argv0) : "";
  if (flags.spawn_ranks && worker_bin.empty()) {
    return LaunchFail("cannot find the worker binary (set TPSERVE_WORKER_BIN)");
  }
  absl::StatusOr<RankLoad> load = RankLoadFor(setup.plan, setup.request);
  if (!load.ok()) return LaunchFail(std::string(load.status().message()), 2);
  absl::StatusOr<GatewayOptions> options = PublicApiOptions(flags);
  if (!options.ok()) return LaunchFail(std::string(options.status().message()), 2);

  // Signals go to one thread (sigwait) so that no handler runs in the middle of anything.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  sigprocmask(SIG_BLOCK, &signals, nullptr);

  RankProcesses procs;  // declared first: its ranks are stopped after everything else
  procs.worker_bin = worker_bin;
  if (absl::Status s = SpawnRanks(flags, worker_bin, setup.ranks, &procs); !s.ok()) {
    return LaunchFail(std::string(s.message()), 2);
  }
  absl::StatusOr<std::vector<JoinedRank>> joined = JoinRanks(flags, procs);
  if (!joined.ok()) return LaunchFail(std::string(joined.status().message()));
  absl::StatusOr<std::unique_ptr<RemoteExecutor>> exec =
      LoadRanks(setup, *load, procs, *joined);
  if (!exec.ok()) return LaunchFail(std::string(exec.status().message()));
  RemoteExecutor* remote = exec->get();
  absl::StatusOr<std::unique_ptr<Gateway>> gateway =
      StartServing(setup, *options, *std::move(exec));
  if (!gateway.ok()) return LaunchFail(std::string(gateway.status().message()));
  std::thread demo = StartDemo(flags, (*gateway)->address(), *options);
  const int exit_code =
      Supervise(flags, **gateway, signals, &procs.pids, ReplacesRanks(setup), remote);
  StopServing(**gateway);
  if (demo.joinable()) demo.join();
  if (!procs.spawned) remote->ShutdownRanks();  // ranks elsewhere exit too (best effort)
  return exit_code;  // ~RankProcesses stops the children; its plane removes the run directory
}

}  // namespace tpserve
