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
// Three steps: flags (deploy/launch_flags.h: every flag read once into LaunchFlags), plan (here:
// the model resolved and loaded, the ClusterRequest the flags ask for, PlanCluster's verdict
// printed; CPU ranks or --gpus), serve (deploy/serve.h: spawn, join, load, serve, supervise).
//
//   bazel run //deploy:launch                          # bundled SmolLM2 on 1 CPU rank
//   bazel run //deploy:launch -- --ranks=3 --port=50051
//   bazel run //deploy:launch -- --gpus=8 --model=405b-fp8 --checkpoint=/models/405b-fp8
//   launch --ranks=3 --spawn_ranks=false --worker_listen=10.0.0.1:7000
//          --cluster_secret_file=/etc/tpserve/secret    # then on each host: worker --coordinator=...

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/step_budget.h"
#include "coordinator/model_bundle.h"
#include "coordinator/speculative/draft_model.h"
#include "deploy/cluster_plan.h"
#include "deploy/gpu_target.h"
#include "deploy/launch_flags.h"
#include "deploy/serve.h"
#include "kernels/cuda_devices.h"
#include "checkpoint/stored_formats.h"
#include "planner/plan_report.h"
#include "planner/roofline.h"

namespace tpserve {
namespace {

// --chat_template; a relative path is the caller's (`bazel run` starts in the runfiles tree).
ModelBundleOptions BundleOptions(const LaunchFlags& flags) {
  ModelBundleOptions options;
  options.chat_template_file = flags.chat_template;
  const char* caller_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (!options.chat_template_file.empty() && caller_dir != nullptr &&
      std::filesystem::path(options.chat_template_file).is_relative()) {
    options.chat_template_file =
        (std::filesystem::path(caller_dir) / options.chat_template_file).string();
  }
  return options;
}

// The --speculative flags into a ClusterRequest (with the draft model's path). `target`: the
// model's opened files (CPU ranks), which --speculative=mtp drafts from; null on GPU ranks.
absl::Status SpeculationFlags(const LaunchFlags& flags, int ranks, const ModelFiles* target,
                              ClusterRequest& want) {
  absl::StatusOr<SpeculativeMethod> method =
      ParseSpeculativeMethod(flags.speculative);
  if (!method.ok()) return method.status();
  SpeculativeOptions& spec = want.speculative;
  spec.method = *method;
  spec.num_speculative_tokens = flags.num_speculative_tokens;
  spec.adaptive = flags.speculative_adaptive;
  spec.max_batch = flags.speculative_max_batch;
  TP_RETURN_IF_ERROR(ValidateSpeculativeOptions(spec));
  const std::string draft = flags.draft_model;
  if ((spec.method == SpeculativeMethod::kDraft) != !draft.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--draft_model=", draft, ": a draft model is given exactly with --speculative=draft (--speculative=",
        SpeculativeMethodName(spec.method), ")"));
  }
  if (spec.method == SpeculativeMethod::kMtp) {  // the model's own MTP layer
    if (target == nullptr) {
      return absl::InvalidArgumentError(
          "--speculative=mtp: GPU ranks do not run a multi-token-prediction draft yet (the "
          "hand-off of the target's hidden states between two GPU backends is not built)");
    }
    want.draft_model_path = want.model_path;
    want.draft_weights = want.weights;
    TP_ASSIGN_OR_RETURN(want.draft, MtpDraftPlan(*target, want.weights, ranks));
    return absl::OkStatus();
  }
  if (draft.empty()) return absl::OkStatus();
  want.draft_weights = flags.draft_weights;
  TP_ASSIGN_OR_RETURN(want.draft, ResolveDraftModel(draft, want.draft_weights, ranks,
                                                    &want.draft_model_path));
  return absl::OkStatus();
}


// The shapes that decide which slices ranks load (names and context may differ).
bool SameShape(const ModelSpec& a, const ModelSpec& b) {
  return a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_layers == b.num_layers &&
         a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim;
}

// --kv_dtype, with auto resolved for GPU or CPU ranks.
absl::StatusOr<DType> KvDtypeFlag(const LaunchFlags& flags, bool gpu) {
  const std::string flag = flags.kv_dtype;
  if (flag == "auto") return gpu ? DType::kBF16 : DType::kF16;
  absl::StatusOr<DType> kv = ParseKvDtype(flag);
  if (!kv.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_dtype: ", kv.status().message()));
  }
  return kv;
}

// --max_tokens_per_step, with 0 resolved for GPU or CPU ranks (base/step_budget.h).
absl::StatusOr<int64_t> StepTokensFlag(const LaunchFlags& flags, bool gpu) {
  if (flags.max_tokens_per_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_tokens_per_step = ", flags.max_tokens_per_step,
                     " must be >= 1 (or 0: ", DefaultMaxTokensPerStep(gpu), " on ",
                     gpu ? "GPUs" : "CPU ranks", ")"));
  }
  return MaxTokensPerStepOr(flags.max_tokens_per_step, gpu);
}

// What the ranks get that the plan does not size: their threads and the collective timeout.
void RankFlags(const LaunchFlags& flags, ClusterRequest& want) {
  want.threads_per_rank = flags.threads_per_rank;
  want.collective_timeout = absl::Milliseconds(flags.collective_timeout_ms);
  want.startup_timeout = absl::Milliseconds(flags.startup_timeout_ms);
  want.strict_kernels = flags.strict_kernels;
  want.enforce_eager = flags.enforce_eager;
}

int CpuMain(const LaunchFlags& flags, const char* argv0) {
  const int ranks = flags.ranks;
  const std::string comm = flags.comm;
  if (comm != "auto" && comm != "shm" && comm != "gloo") {
    return LaunchFail(absl::StrCat("--comm = \"", comm, "\" must be auto, shm or gloo"), 2);
  }
  if (ranks < 1 || ranks > 64) {
    return LaunchFail(absl::StrCat("--ranks = ", ranks, " must be in [1, 64]"), 2);
  }
  if (flags.pp < 1 || ranks * flags.pp > 64) {
    return LaunchFail(absl::StrCat("--pp = ", flags.pp, " must be >= 1 with --ranks x --pp in "
                                   "[1, 64] (--ranks = ", ranks, ")"), 2);
  }
  absl::StatusOr<std::string> model_path = ResolveModelPath(flags.model);
  if (!model_path.ok()) return LaunchFail(std::string(model_path.status().message()), 2);
  absl::StatusOr<ModelBundle> bundle = LoadModelBundle(*model_path, BundleOptions(flags));
  if (!bundle.ok()) return LaunchFail(std::string(bundle.status().message()));
  absl::StatusOr<DType> kv_dtype = KvDtypeFlag(flags, /*gpu=*/false);
  if (!kv_dtype.ok()) return LaunchFail(std::string(kv_dtype.status().message()), 2);
  absl::StatusOr<int64_t> step_tokens = StepTokensFlag(flags, /*gpu=*/false);
  if (!step_tokens.ok()) return LaunchFail(std::string(step_tokens.status().message()), 2);

  ClusterRequest want;
  want.ranks = ranks;
  want.pp = flags.pp;
  want.context_tokens = flags.context;
  want.max_seqs = flags.max_seqs;
  want.max_tokens_per_step = *step_tokens;
  want.weights = flags.weights;
  want.kv_dtype = *kv_dtype;
  want.deterministic_tp = flags.deterministic_tp;
  want.deterministic_tp_chunks = flags.deterministic_tp_chunks;
  want.expert_parallel = flags.expert_parallel;
  want.attention_dp = flags.attention_dp;
  RankFlags(flags, want);
  want.model_path = *model_path;
  if (absl::Status s = SpeculationFlags(flags, ranks, &bundle->files, want); !s.ok()) {
    return LaunchFail(std::string(s.message()), 2);
  }
  absl::StatusOr<ClusterPlan> plan = PlanCluster(bundle->files, want);
  if (!plan.ok()) return LaunchFail(std::string(plan.status().message()), 2);
  std::fprintf(stderr, "%s", plan->summary.c_str());
  LaunchSetup setup;
  setup.flags = flags;
  setup.bundle = &*bundle;
  setup.request = std::move(want);
  setup.plan = *std::move(plan);
  setup.ranks = ranks * flags.pp;
  setup.comm_kind = comm;
  return Serve(argv0, setup);
}

// --gpus=N: plan the model on N GPUs, say what is missing (devices, a checkpoint) with the
// plan in hand, or start N CUDA ranks joined by NCCL.
int GpuMain(const LaunchFlags& flags, const char* argv0) {
  const int gpus = flags.gpus;
  if (gpus > 64) return LaunchFail(absl::StrCat("--gpus = ", gpus, " must be in [1, 64]"), 2);
  if (flags.pp < 1 || gpus * flags.pp > 64) {
    return LaunchFail(absl::StrCat("--pp = ", flags.pp, " must be >= 1 with --gpus x --pp in "
                                   "[1, 64] (--gpus = ", gpus, ")"), 2);
  }
  const int devices = gpus * flags.pp;  // every stage's GPUs
  absl::StatusOr<DType> kv_dtype = KvDtypeFlag(flags, /*gpu=*/true);
  if (!kv_dtype.ok()) return LaunchFail(std::string(kv_dtype.status().message()), 2);
  absl::StatusOr<int64_t> step_tokens = StepTokensFlag(flags, /*gpu=*/true);
  if (!step_tokens.ok()) return LaunchFail(std::string(step_tokens.status().message()), 2);
  // The model: a checkpoint path, or a shape preset such as "405b-fp8" (shape, then weights).
  const std::string model = flags.model;
  std::string checkpoint = flags.checkpoint;
  std::string weights = flags.weights;
  absl::StatusOr<ModelSpec> config = absl::NotFoundError("");
  WeightFormats formats;
  std::optional<ModelBundle> bundle;
  if (checkpoint.empty() && std::filesystem::exists(model)) checkpoint = model;
  if (!std::filesystem::exists(model)) {
    const size_t dash = model.find('-');
    config = ModelSpecPreset(model.substr(0, dash));
    if (!config.ok()) return LaunchFail(std::string(config.status().message()), 2);
    if (weights.empty()) weights = dash == std::string::npos ? "bf16" : model.substr(dash + 1);
    absl::StatusOr<WeightFormats> preset = WeightFormatsPreset(weights);
    if (!preset.ok()) return LaunchFail(absl::StrCat("--model=", model, ": ", preset.status().message()), 2);
    formats = *preset;
    FitInt4Groups(*config, gpus, &formats);
  }
  if (!checkpoint.empty()) {
    absl::StatusOr<ModelBundle> loaded = LoadModelBundle(checkpoint, BundleOptions(flags));
    if (!loaded.ok()) return LaunchFail(std::string(loaded.status().message()));
    bundle.emplace(*std::move(loaded));
    if (config.ok() && !SameShape(*config, bundle->files.config)) {
      return LaunchFail(absl::StrCat("--checkpoint=", checkpoint, " holds ", bundle->files.config.name,
                               ", not the ", config->name, " shape --model names"), 2);
    }
    config = bundle->files.config;
    absl::StatusOr<WeightFormats> held = ResolveWeightFormats(
        bundle->files.stored_formats, weights, bundle->files.config, gpus);
    if (!held.ok()) return LaunchFail(std::string(held.status().message()), 2);
    formats = *held;
  }
  ClusterRequest want;
  want.ranks = gpus;
  want.pp = flags.pp;
  want.context_tokens = flags.context;
  want.max_seqs = flags.max_seqs;
  want.max_tokens_per_step = *step_tokens;
  want.kv_dtype = *kv_dtype;
  want.deterministic_tp = flags.deterministic_tp;
  want.deterministic_tp_chunks = flags.deterministic_tp_chunks;
  want.expert_parallel = flags.expert_parallel;
  want.attention_dp = flags.attention_dp;
  RankFlags(flags, want);
  if (absl::Status s = SpeculationFlags(flags, gpus, /*target=*/nullptr, want); !s.ok()) {
    return LaunchFail(std::string(s.message()), 2);
  }
  // Ranks spawned here: the GPUs found here, else the product's (or --gpu's), the plan printed
  // either way. Ranks started elsewhere: the GPUs --gpu names.
  const absl::StatusOr<GpuTarget> target =
      flags.spawn_ranks ? ChooseGpuTarget(flags.gpu, devices, VisibleCudaDevices())
                        : RemoteGpuTarget(flags.gpu, gpus);
  if (!target.ok()) return LaunchFail(std::string(target.status().message()), 2);
  absl::StatusOr<MemoryPlan> memory = PlanGpus(*config, formats, gpus, target->spec, want);
  if (!memory.ok()) return LaunchFail(std::string(memory.status().message()), 2);
  std::fprintf(stderr, "%s", RenderPlanTable(*memory, EstimateRoofline(*memory, {})).c_str());
  if (const std::string missing = MissingDevicesLine(*target, devices);
      flags.spawn_ranks && !missing.empty()) {
    return LaunchFail(missing, 2);
  }
  if (!bundle.has_value()) {
    return LaunchFail(absl::StrCat(
                    "--model=", model, " names a shape, not weights: pass --checkpoint=DIR, a "
                    "Hugging Face Llama directory with that shape (config.json and safetensors; ",
                    weights == "fp8" ? "for fp8, e.g. Meta's Llama-3.1-*-FP8 (fbgemm_fp8) or a "
                                       "compressed-tensors FP8 export, or any bf16 checkpoint "
                                       "quantized on load with --weights=fp8)"
                                     : "stored as it is, or quantized on load with --weights)"),
                2);
  }
  absl::StatusOr<ClusterPlan> plan = GpuClusterPlan(*std::move(memory), want);
  if (!plan.ok()) return LaunchFail(std::string(plan.status().message()), 2);
  std::fprintf(stderr, "%s", plan->summary.c_str());
  want.model_path = checkpoint;
  want.weights = flags.weights;  // as the ranks were always sent it
  LaunchSetup setup;
  setup.flags = flags;
  setup.bundle = &*bundle;
  setup.request = std::move(want);
  setup.plan = *std::move(plan);
  setup.ranks = devices;
  setup.backend = "cuda";
  setup.comm_kind = "nccl";
  return Serve(argv0, setup);
}

int Main(const LaunchFlags& flags, const char* argv0) {
  return flags.gpus > 0 ? GpuMain(flags, argv0) : CpuMain(flags, argv0);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Launch a tensor-parallel tpserve cluster on this machine.");
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main(tpserve::ReadLaunchFlags(), argv[0]);
}
