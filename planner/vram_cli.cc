#include "planner/vram_cli.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/step_budget.h"
#include "checkpoint/model_files.h"
#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "base/str_cat.h"
#include "model/config.h"
#include "model/sharding.h"
#include "base/version.h"
#include "planner/capacity_report.h"
#include "planner/fit.h"
#include "planner/plan_json.h"
#include "planner/plan_report.h"

namespace tpserve {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
// Host peak when not given: cores * 2.5 GHz * 32 fp32 FLOP/cycle (two AVX2 FMA ports x 8
// lanes x 2). A stated assumption for the prefill estimate only; memory does not use it.
constexpr double kHostAssumedHz = 2.5e9;
constexpr double kHostFlopsPerCycle = 32;

template <typename Value, typename Bound>
absl::Status FlagError(std::string_view flag, const Value& value, const Bound& bound) {
  return absl::InvalidArgumentError(StrCat("--", flag, "=", value, ": ", bound));
}

struct LoadedModel {
  ModelSpec config;
  std::optional<WeightFormats> file_formats;  // a checkpoint's own formats (.gguf or safetensors)
  std::optional<int64_t> checkpoint_tensor_bytes;
};

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<LoadedModel> LoadGguf(const std::string& path) {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  LoadedModel m;
  TP_ASSIGN_OR_RETURN(m.config, ModelSpecFromGguf(*gguf));
  std::vector<NamedTensorType> tensors;
  int64_t bytes = 0;
  for (const GgufTensorInfo& t : gguf->tensor_infos()) {
    const GgmlTypeInfo* type = FindGgmlType(t.ggml_type);
    tensors.push_back(
        {t.name, type != nullptr ? std::string(type->name) : StrCat("ggml type ", t.ggml_type)});
    bytes += t.nbytes;
  }
  TP_ASSIGN_OR_RETURN(m.file_formats,
                      WeightFormatsFromTensorTypes(tensors, m.config.tie_word_embeddings));
  m.checkpoint_tensor_bytes = bytes;
  return m;
}

// A Hugging Face directory with its weights: the formats they are stored in (quantized
// layouts included), read as the engine reads them.
absl::StatusOr<LoadedModel> LoadCheckpointDirectory(const std::string& dir) {
  TP_ASSIGN_OR_RETURN(ModelFiles files, OpenModelFiles(dir));
  LoadedModel m;
  m.config = files.config;
  m.file_formats = files.stored_formats;
  int64_t bytes = 0;
  for (const std::string& name : files.weights->TensorNames()) {
    // A multimodal checkpoint's other towers (Llama 4's vision model) are not planned.
    bool unserved = false;
    for (const std::string& p : files.config.hf_unserved_weight_prefixes) {
      unserved |= absl::StartsWith(name, p);
    }
    absl::StatusOr<TensorView> t = files.weights->Find(name);
    if (t.ok() && !unserved) bytes += t->nbytes;
  }
  m.checkpoint_tensor_bytes = bytes;
  return m;
}

// --model: a .gguf file, a checkpoint directory, a config.json (or a directory holding only
// one), or a preset name.
absl::StatusOr<LoadedModel> LoadModel(const std::string& spec) {
  if (spec.empty())
    return FlagError("model", "\"\"", "required: a preset name, config.json or .gguf");
  if (absl::EndsWith(spec, ".gguf")) return LoadGguf(spec);
  std::string json_path = spec;
  std::error_code not_a_directory;
  if (std::filesystem::is_directory(spec, not_a_directory)) {
    if (std::filesystem::exists(spec + "/model.safetensors") ||
        std::filesystem::exists(spec + "/model.safetensors.index.json")) {
      return LoadCheckpointDirectory(spec);
    }
    json_path = spec + "/config.json";
  }
  if (absl::EndsWith(json_path, ".json")) {
    TP_ASSIGN_OR_RETURN(std::string text, ReadFile(json_path));
    LoadedModel m;
    absl::StatusOr<ModelSpec> config = ModelSpecFromHfJson(text);
    if (!config.ok()) {
      return absl::InvalidArgumentError(StrCat(json_path, ": ", config.status().message()));
    }
    m.config = *std::move(config);
    return m;
  }
  absl::StatusOr<ModelSpec> preset = ModelSpecPreset(spec);
  if (!preset.ok()) return FlagError("model", spec, preset.status().message());
  return LoadedModel{*std::move(preset), std::nullopt, std::nullopt};
}

// --role_formats=embedding=q8_0,lm_head=bf16
absl::Status ApplyRoleFormats(std::string_view spec, WeightFormats& formats) {
  for (absl::string_view item :
       absl::StrSplit(absl::string_view(spec.data(), spec.size()), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::optional<TensorRole> role;
    for (TensorRole r : kAllTensorRoles) {
      if (TensorRoleName(r) == kv.first) role = r;
    }
    if (!role) return FlagError("role_formats", item, "unknown role (embedding, q, ..., lm_head)");
    absl::StatusOr<TensorFormat> format = ParseTensorFormat(kv.second);
    if (!format.ok()) return FlagError("role_formats", item, format.status().message());
    formats.Set(*role, *format);
    formats.preset = StrCat(formats.preset, "+", kv.first, "=", kv.second);
  }
  return formats.Validate();
}

absl::StatusOr<GpuSpec> DeviceFor(const VramRequest& r, int64_t gpus) {
  GpuSpec d;
  if (r.gpu == "cpu-host") {
    if (!(r.host_bandwidth_gbs > 0)) {
      return FlagError("host_bandwidth_gbs", r.host_bandwidth_gbs,
                       "must be > 0 with --gpu=cpu-host (the measured memory bandwidth in GB/s)");
    }
    const double peak = r.host_peak_gflops > 0 ? r.host_peak_gflops * 1e9
                                               : std::max(1u, std::thread::hardware_concurrency()) *
                                                     kHostAssumedHz * kHostFlopsPerCycle;
    TP_ASSIGN_OR_RETURN(d, HostCpuSpec(r.meminfo, r.host_bandwidth_gbs * 1e9, peak));
    if (gpus > 1) {  // the ranks share this host: each plans against its share
      const GpuSpec whole = d;
      d = HostCpuSpecFromMemTotal(whole.memory_bytes / gpus,
                                  whole.memory_bandwidth_bytes_per_s / gpus,
                                  whole.peak_flops / gpus);
      d.interconnect = whole.interconnect;  // shared memory runs at the host's speed
      d.description = StrCat(whole.description, ", shared by ", gpus, " ranks");
    }
  } else {
    absl::StatusOr<GpuSpec> preset = GpuPreset(r.gpu);
    if (!preset.ok()) return FlagError("gpu", r.gpu, preset.status().message());
    d = *std::move(preset);
  }
  if (r.gpu_memory_gib > 0) d.memory_bytes = static_cast<int64_t>(r.gpu_memory_gib * kGiB);
  if (r.bandwidth_gbs > 0) d.memory_bandwidth_bytes_per_s = r.bandwidth_gbs * 1e9;
  if (r.peak_tflops > 0) d.peak_flops = r.peak_tflops * 1e12;
  if (r.link_gbs > 0) d.interconnect.bandwidth_bytes_per_s = r.link_gbs * 1e9;
  if (r.link_latency_us >= 0) d.interconnect.latency_s = r.link_latency_us * 1e-6;
  return d;
}

// --max_tokens_per_step, or (0) what launch would run on the same device.
int64_t StepTokens(const VramRequest& r) {
  return MaxTokensPerStepOr(r.max_tokens_per_step, /*gpu=*/r.gpu != "cpu-host");
}

absl::Status CheckNumericFlags(const VramRequest& r) {
  if (r.users < 1) return FlagError("users", r.users, "must be >= 1");
  if (r.context < 0) return FlagError("context", r.context, "must be >= 0 (0: the model's)");
  if (r.max_tokens_per_step < 0) {
    return FlagError("max_tokens_per_step", r.max_tokens_per_step,
                     "must be >= 1 (or 0: the engine's default for the device)");
  }
  if (r.max_seqs_per_step < 1 || r.max_seqs_per_step > StepTokens(r)) {
    return FlagError("max_seqs_per_step", r.max_seqs_per_step,
                     StrCat("must be in [1, --max_tokens_per_step=", StepTokens(r), "]"));
  }
  if (r.block_size < 1) return FlagError("block_size", r.block_size, "must be >= 1");
  if (r.safety >= 1) return FlagError("safety", r.safety, "must be in [0, 1)");
  if (!(r.decode_efficiency > 0 && r.decode_efficiency <= 1)) {
    return FlagError("decode_efficiency", r.decode_efficiency, "must be in (0, 1]");
  }
  if (!(r.prefill_efficiency > 0 && r.prefill_efficiency <= 1)) {
    return FlagError("prefill_efficiency", r.prefill_efficiency, "must be in (0, 1]");
  }
  if (r.prompt_tokens < 0) return FlagError("prompt_tokens", r.prompt_tokens, "must be >= 0");
  if (r.max_gpus < 1) return FlagError("max_gpus", r.max_gpus, "must be >= 1");
  return absl::OkStatus();
}

absl::StatusOr<FormatKind> PlainKind(std::string_view flag, std::string_view value,
                                     FormatKind default_kind) {
  if (value.empty()) return default_kind;
  absl::StatusOr<TensorFormat> f = ParseTensorFormat(value == "fp8" ? "fp8-e4m3" : value);
  if (!f.ok() || !IsPlainFormat(f->kind)) {
    return FlagError(flag, value, "must be one of f32, f16, bf16, fp8");
  }
  return f->kind;
}

}  // namespace

absl::StatusOr<std::vector<VramLayout>> VramLayouts(const VramRequest& r) {
  if (r.gpus.empty()) return FlagError("gpus", "\"\"", "needs a device count");
  if (r.pp < 1) return FlagError("pp", r.pp, "must be >= 1");
  std::vector<VramLayout> counts;
  for (const std::string& entry : r.gpus) {
    VramLayout layout;
    const std::vector<std::string> parts = absl::StrSplit(entry, 'x');
    int64_t first = 0, pp = r.pp;  // the count, or TPxPP's tp
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &first) ||
        (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &pp))) {
      return FlagError("gpus", entry,
                       "must be a device count (8) or tp x pp (8x2), comma-separated");
    }
    if (parts.size() == 1) {  // a count: tp x --pp
      if (first < 1) return FlagError("gpus", entry, "must be >= 1");
      if (first > (int64_t{1} << 20)) return FlagError("gpus", entry, "must be <= 1048576");
      if (first % r.pp != 0) {
        return FlagError("pp", r.pp, StrCat("must be >= 1 and divide --gpus=", entry));
      }
      layout.gpus = first;
      layout.pp = r.pp;
    } else {
      if (first < 1 || pp < 1) return FlagError("gpus", entry, "tp and pp must be >= 1");
      if (first > (int64_t{1} << 20) || pp > (int64_t{1} << 20)) {
        return FlagError("gpus", entry, "tp and pp must be <= 1048576");
      }
      layout.gpus = first * pp;
      layout.pp = pp;
    }
    counts.push_back(layout);
  }
  std::vector<VramLayout> layouts;
  const std::vector<std::string> formats =
      r.weights.empty() ? std::vector<std::string>{""} : r.weights;
  for (const VramLayout& count : counts) {
    for (const std::string& weights : formats) {
      layouts.push_back(count);
      layouts.back().weights = weights;
    }
  }
  return layouts;
}

namespace {

// The models a request names, read once for all its layouts.
struct VramModels {
  LoadedModel target;
  std::optional<LoadedModel> draft;
};

absl::StatusOr<VramModels> LoadModels(const VramRequest& r) {
  VramModels models;
  TP_ASSIGN_OR_RETURN(models.target, LoadModel(r.model));
  if (r.draft_model == "mtp") {  // the target's own multi-token-prediction layer
    absl::StatusOr<ModelSpec> mtp = MtpDraftSpec(models.target.config);
    if (!mtp.ok()) return FlagError("draft_model", r.draft_model, mtp.status().message());
    models.draft = LoadedModel{*std::move(mtp), std::nullopt, std::nullopt};
  } else if (!r.draft_model.empty()) {
    TP_ASSIGN_OR_RETURN(models.draft, LoadModel(r.draft_model));
  } else if (!r.draft_weights.empty()) {
    return FlagError("draft_weights", r.draft_weights, "needs --draft_model");
  }
  return models;
}

// --weights / --draft_weights: the preset named, else the checkpoint's own formats, else bf16;
// int4 groups fitted to the tensor-parallel degree.
absl::StatusOr<WeightFormats> FormatsFor(std::string_view flag, const std::string& preset,
                                         const LoadedModel& model, int tp) {
  WeightFormats formats;
  if (!preset.empty() || !model.file_formats) {
    absl::StatusOr<WeightFormats> named = WeightFormatsPreset(preset.empty() ? "bf16" : preset);
    if (!named.ok()) return FlagError(flag, preset, named.status().message());
    formats = *std::move(named);
  } else {
    formats = *model.file_formats;
  }
  FitInt4Groups(model.config, tp, &formats);
  return formats;
}

absl::StatusOr<PlanInputs> PlanInputsFor(const VramRequest& r, const VramLayout& layout,
                                         const VramModels& models) {
  PlanInputs in;
  in.model = models.target.config;
  TP_ASSIGN_OR_RETURN(in.device, DeviceFor(r, layout.gpus));
  in.pp = static_cast<int>(layout.pp);
  in.tp = static_cast<int>(layout.gpus / layout.pp);
  TP_ASSIGN_OR_RETURN(in.weights, FormatsFor("weights", layout.weights, models.target, in.tp));
  TP_RETURN_IF_ERROR(ApplyRoleFormats(r.role_formats, in.weights));
  const FormatKind host_default = in.device.is_host ? FormatKind::kF32 : FormatKind::kBF16;
  // auto, as launch's --kv_dtype: bf16 on GPUs (their activations; FlashInfer reads it as
  // stored), f16 on the CPU host.
  absl::StatusOr<DType> kv =
      r.kv_dtype.empty() || r.kv_dtype == "auto"
          ? absl::StatusOr<DType>(in.device.is_host ? DType::kF16 : DType::kBF16)
          : ParseKvDtype(r.kv_dtype);
  if (!kv.ok()) {
    return FlagError("kv_dtype", r.kv_dtype, "must be one of auto, f32, f16, bf16, fp8");
  }
  in.kv_cache_dtype = FormatOfDType(*kv).kind;
  TP_ASSIGN_OR_RETURN(in.activation_dtype, PlainKind("activations", r.activations, host_default));
  if (in.activation_dtype == FormatKind::kF8E4M3) {
    return FlagError("activations", r.activations, "must be one of f32, f16, bf16");
  }
  const int64_t model_ctx = in.model.max_context_tokens;
  in.max_context_tokens = r.context > 0 ? r.context : model_ctx;
  if (model_ctx > 0 && in.max_context_tokens > model_ctx) {
    return FlagError("context", r.context,
                     StrCat("must be <= ", model_ctx, ", the model's context length"));
  }
  if (r.block_size > in.max_context_tokens) {
    return FlagError("block_size", r.block_size,
                     StrCat("must be <= the context (", in.max_context_tokens, " tokens)"));
  }
  in.max_tokens_per_step = StepTokens(r);
  in.max_sequences_per_step = r.max_seqs_per_step;
  in.target_concurrent_sequences = r.users;
  in.kv_block_size_tokens = r.block_size;
  in.deterministic_tp = r.deterministic_tp;
  in.cuda_graphs = !r.enforce_eager;
  in.deterministic_tp_chunks = r.deterministic_tp_chunks;
  in.expert_parallel = r.expert_parallel;
  in.attention_dp = r.attention_dp;
  if (r.reserve_gib >= 0) in.runtime_reserve_bytes = static_cast<int64_t>(r.reserve_gib * kGiB);
  if (r.safety >= 0) in.safety_fraction = r.safety;
  if (models.draft.has_value()) {
    DraftPlanInputs d;
    d.model = models.draft->config;
    // An MTP layer is held as the target is (--weights), unless --draft_weights says otherwise.
    const bool mtp = d.model.is_mtp_draft();
    const std::string& preset = mtp && r.draft_weights.empty() ? layout.weights : r.draft_weights;
    TP_ASSIGN_OR_RETURN(d.weights, FormatsFor(mtp && r.draft_weights.empty() ? "weights"
                                                                           : "draft_weights",
                                              preset, mtp ? models.target : *models.draft,
                                              in.tp));
    d.max_sequences_per_step = in.max_sequences_per_step;
    in.draft = std::move(d);
  }
  return in;
}

}  // namespace

absl::StatusOr<PlanInputs> BuildPlanInputs(const VramRequest& r, const VramLayout& layout,
                                           std::optional<int64_t>* checkpoint_tensor_bytes) {
  TP_RETURN_IF_ERROR(CheckNumericFlags(r));
  TP_ASSIGN_OR_RETURN(VramModels models, LoadModels(r));
  if (checkpoint_tensor_bytes != nullptr) {
    *checkpoint_tensor_bytes = models.target.checkpoint_tensor_bytes;
  }
  return PlanInputsFor(r, layout, models);
}

RooflineAssumptions RooflineAssumptionsFor(const VramRequest& r) {
  RooflineAssumptions a;
  a.prefill_efficiency = r.prefill_efficiency;
  a.decode_efficiency = r.decode_efficiency;
  a.prompt_tokens = r.prompt_tokens;
  return a;
}

namespace {

void PrintPlanError(const PlanInputs& in, const absl::Status& status, std::ostream& err) {
  err << "vram: --gpus=" << in.tp * in.pp << " --pp=" << in.pp << " --weights=" << in.weights.preset
      << ": " << status.message() << "\n";
  absl::StatusOr<int64_t> bound = WeightsOnlyMinGpus(in);
  if (bound.ok()) {
    err << "vram: capacity check: " << *bound << " x " << in.device.name
        << " could hold the weights alone if they could be split anywhere; --fit finds the "
           "fewest GPUs of a runnable layout\n";
  }
}

// "8 x h100-80g (tp=8), fp8": names a layout on the report and in its charts.
std::string LayoutLabel(const PlanInputs& in) {
  return StrCat(in.tp * in.pp, " x ", in.device.name, " (tp=", in.tp,
                in.pp > 1 ? StrCat(", pp=", in.pp) : std::string(), "), ", in.weights.preset);
}

// One planned layout, with what the text and JSON print for it.
struct PlannedLayout {
  MemoryPlan plan;
  Roofline roofline;
  std::vector<Suggestion> suggestions;
  std::optional<int64_t> file_bytes;
};

std::string PlanText(const PlannedLayout& p) {
  std::string out = RenderPlanTable(p.plan, p.roofline);
  if (p.file_bytes) {
    absl::StrAppend(&out, "CHECK     tensor bytes in the file: ", WithThousands(*p.file_bytes),
                    "; planned checkpoint bytes: ",
                    WithThousands(p.plan.sharding.checkpoint_bytes),
                    *p.file_bytes == p.plan.sharding.checkpoint_bytes ? " (equal)" : " (DIFFERENT)",
                    "\n");
  }
  if (!p.plan.meets_target) absl::StrAppend(&out, "\n", RenderSuggestions(p.suggestions));
  return out;
}

nlohmann::json PlanJson(const PlannedLayout& p) {
  nlohmann::json j = {{"plan", PlanToJson(p.plan, p.roofline)},
                      {"suggestions", SuggestionsToJson(p.suggestions)}};
  if (p.file_bytes) j["checkpoint_file_tensor_bytes"] = *p.file_bytes;
  return j;
}

absl::Status WriteFile(std::string_view flag, const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file << text;
  if (file) file.close();
  if (!file) {
    return FlagError(flag, path, StrCat("cannot write: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// --report and --svg: the layouts drawn, each with its capacity curve.
absl::Status WriteReport(const VramRequest& request, const std::vector<PlannedLayout>& planned,
                         const std::string& text) {
  CapacityReport report;
  report.version = kTpserveVersion;
  report.command_line = request.command_line;
  report.text_report = text;
  for (const PlannedLayout& p : planned) {
    const std::string label = LayoutLabel(p.plan.inputs);
    report.layouts.push_back({label, p.plan, p.roofline});
    TP_ASSIGN_OR_RETURN(CapacityCurve curve, PlanCapacityCurve(p.plan.inputs, label));
    report.curves.push_back(std::move(curve));
  }
  if (!request.report.empty()) {
    TP_RETURN_IF_ERROR(WriteFile("report", request.report, RenderCapacityReportHtml(report)));
  }
  if (!request.svg.empty()) {
    TP_RETURN_IF_ERROR(WriteFile("svg", request.svg, RenderMemorySvg(report)));
  }
  return absl::OkStatus();
}

int RunPlans(const VramRequest& request, const std::vector<VramLayout>& layouts,
             const FitOptions& options, const RooflineAssumptions& assumptions,
             std::ostream& out, std::ostream& err) {
  absl::StatusOr<VramModels> models = LoadModels(request);
  if (!models.ok()) {
    err << "vram: " << models.status().message() << "\n";
    return 2;
  }
  // Every layout is planned before anything is printed: a bad one fails the whole request.
  std::vector<PlannedLayout> planned;
  for (const VramLayout& layout : layouts) {
    PlannedLayout p;
    p.file_bytes = models->target.checkpoint_tensor_bytes;
    absl::StatusOr<PlanInputs> in = PlanInputsFor(request, layout, *models);
    if (!in.ok()) {
      err << "vram: " << in.status().message() << "\n";
      return 2;
    }
    absl::StatusOr<MemoryPlan> plan = PlanMemory(*in);
    if (!plan.ok()) {
      PrintPlanError(*in, plan.status(), err);
      return 2;
    }
    p.plan = *std::move(plan);
    p.roofline = EstimateRoofline(p.plan, assumptions);
    if (!p.plan.meets_target) {
      p.suggestions = SuggestAlternatives(*in, options).value_or(std::vector<Suggestion>{});
    }
    planned.push_back(std::move(p));
  }
  const bool draws = !request.report.empty() || !request.svg.empty();
  std::string text;  // the tables: printed, or quoted by the report
  for (size_t i = 0; (!request.json || draws) && i < planned.size(); ++i) {
    absl::StrAppend(&text, i > 0 ? "\n" : "", PlanText(planned[i]));
  }
  if (request.json) {
    if (planned.size() == 1) {
      out << PlanJson(planned[0]).dump(2) << "\n";
    } else {
      nlohmann::json all = nlohmann::json::array();
      for (const PlannedLayout& p : planned) all.push_back(PlanJson(p));
      out << nlohmann::json{{"layouts", all}}.dump(2) << "\n";
    }
  } else {
    out << text;
  }
  if (draws) {
    const absl::Status written = WriteReport(request, planned, text);
    if (!written.ok()) {
      err << "vram: " << written.message() << "\n";
      return 2;
    }
  }
  for (const PlannedLayout& p : planned) {
    if (!p.plan.meets_target) return 1;
  }
  return 0;
}

int RunFit(const PlanInputs& in, const FitOptions& options, const RooflineAssumptions& assumptions,
           bool json, std::ostream& out, std::ostream& err) {
  absl::StatusOr<FitResult> fit = FitGpuCount(in, options);
  if (!fit.ok()) {
    err << "vram: " << fit.status().message() << "\n";
    return 2;
  }
  std::vector<Suggestion> suggestions;
  if (!fit->found) {
    suggestions = SuggestAlternatives(in, options).value_or(std::vector<Suggestion>{});
  }
  if (json) {
    out << nlohmann::json{{"fit", FitToJson(*fit, assumptions)},
                          {"suggestions", SuggestionsToJson(suggestions)}}
               .dump(2)
        << "\n";
  } else {
    out << RenderFit(*fit);
    if (fit->found) {
      out << RenderPlanTable(*fit->plan, EstimateRoofline(*fit->plan, assumptions));
    } else {
      out << RenderSuggestions(suggestions);
    }
  }
  return fit->found ? 0 : 1;
}

}  // namespace

int RunVram(const VramRequest& request, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<VramLayout>> layouts = VramLayouts(request);
  absl::Status bad = layouts.ok() ? CheckNumericFlags(request) : layouts.status();
  if (bad.ok() && request.fit) {
    if (layouts->size() > 1) {
      bad = FlagError("fit", "true",
                      "searches the GPU count itself: give one --gpus and one --weights");
    } else if (!request.report.empty() || !request.svg.empty()) {
      bad = FlagError("fit", "true",
                      "--report and --svg draw the --gpus layouts: run --fit, then --report with "
                      "the layout it finds");
    }
  }
  if (!bad.ok()) {
    err << "vram: " << bad.message() << "\n";
    return 2;
  }
  const FitOptions options{static_cast<int>(std::min<int64_t>(request.max_gpus, 1 << 20)),
                           request.allow_pipeline};
  const RooflineAssumptions assumptions = RooflineAssumptionsFor(request);
  if (request.fit) {
    absl::StatusOr<PlanInputs> in = BuildPlanInputs(request, layouts->front(), nullptr);
    if (!in.ok()) {
      err << "vram: " << in.status().message() << "\n";
      return 2;
    }
    return RunFit(*in, options, assumptions, request.json, out, err);
  }
  return RunPlans(request, *layouts, options, assumptions, out, err);
}

}  // namespace tpserve
