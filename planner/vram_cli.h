// The `vram` calculator behind deploy/vram_main.cc: turns flag values into PlanInputs (every
// bad value becomes an error naming the flag, the value and the bound), plans, and prints the
// per-GPU table, the JSON, the fit or the suggestions.
//
//   VramRequest request;  request.model = "405b";  request.weights = {"fp8"};
//   request.gpus = {"4", "8", "8x2"};  request.report = "capacity.html";
//   int exit_code = RunVram(request, std::cout, std::cerr);
//
// Several --gpus and --weights values compare layouts: every count with every format is
// planned and printed in turn (--json: {"layouts": [...]}), and --report / --svg draw them side
// by side (planner/capacity_report.h).
// Exit codes: 0 every plan meets the target (or --fit found a layout), 1 one does not (the
// output says what is over and suggests changes), 2 bad flags or an unrunnable request.
// Thread-compatible: no shared state.
#ifndef TPSERVE_PLANNER_VRAM_CLI_H_
#define TPSERVE_PLANNER_VRAM_CLI_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/memory_plan.h"
#include "planner/roofline.h"

namespace tpserve {

// One field per flag of deploy/vram_main.cc (same names, dashes as underscores); 0 or -1 or
// "" mean "use the default" as the flag help says.
struct VramRequest {
  std::string model;         // preset name, path to config.json, or path to a .gguf
  // Speculative decoding's draft model, as --model; "" = none. Its weights as --draft_weights
  // (a preset; "" = bf16, or the GGUF's own types).
  std::string draft_model;
  std::string draft_weights;
  // Weight format presets compared; empty = bf16 (or the checkpoint's own types).
  std::vector<std::string> weights;
  std::string role_formats;  // per-role overrides: "embedding=q8_0,lm_head=bf16"
  std::string kv_dtype;      // KV cache dtype: auto (= ""), f32, f16, bf16, fp8; as launch's
  std::string activations;   // "" = bf16 on GPUs, f32 on cpu-host
  // Layouts compared: each a device count (tp * --pp) or "TPxPP" ("8x2": tp 8, 2 stages).
  std::vector<std::string> gpus = {"1"};
  int64_t pp = 1;  // pipeline stages of the plain counts
  std::string gpu = "h100-80g";  // preset or "cpu-host"
  int64_t context = 0;           // 0 = the model's max context
  int64_t users = 1;
  int64_t max_tokens_per_step = 0;  // 0: the engine's (base/step_budget.h) for the device
  int64_t max_seqs_per_step = 256;
  int64_t block_size = 16;
  bool deterministic_tp = false;  // the engine's --deterministic_tp reduction
  bool enforce_eager = false;     // the engine's --enforce_eager: no CUDA graphs to count
  int64_t deterministic_tp_chunks = 0;  // and its --deterministic_tp_chunks (0: the default)
  bool expert_parallel = false;   // the engine's --expert_parallel placement
  bool attention_dp = false;      // the engine's --attention_dp layout
  double gpu_memory_gib = 0;      // > 0 overrides the preset's memory
  double bandwidth_gbs = 0;       // > 0 overrides the memory bandwidth
  double peak_tflops = 0;         // > 0 overrides the peak FLOP/s
  double link_gbs = 0;            // > 0 overrides the interconnect bandwidth (per direction)
  double link_latency_us = -1;    // >= 0 overrides the per-collective latency
  double reserve_gib = -1;        // >= 0 overrides the runtime reserve
  double safety = -1;             // >= 0 overrides the safety fraction
  double host_bandwidth_gbs = 0;  // required with --gpu=cpu-host
  double host_peak_gflops = 0;    // 0 = cores * 2.5 GHz * 32 FLOP/cycle (stated assumption)
  std::string meminfo = "/proc/meminfo";
  double prefill_efficiency = 0.5;
  double decode_efficiency = 1.0;  // fraction of memory bandwidth decode reaches (measured)
  int64_t prompt_tokens = 0;  // 0 = context
  bool fit = false;
  int64_t max_gpus = 64;
  bool allow_pipeline = false;
  bool json = false;
  std::string report;        // write the HTML capacity report here ("" = none)
  std::string svg;           // write the memory chart alone here as SVG ("" = none)
  std::string command_line;  // as typed, stated on the report
};

// One layout of a request: a device count, its pipeline stages and a weights preset.
struct VramLayout {
  int64_t gpus = 1;
  int64_t pp = 1;
  std::string weights;  // "" = bf16, or the checkpoint's own
};

// Every --gpus entry with every --weights preset, in the order given. INVALID_ARGUMENT
// naming --gpus or --pp for an entry that is not a count or TPxPP, or a --pp that does not
// divide a count.
absl::StatusOr<std::vector<VramLayout>> VramLayouts(const VramRequest& request);

// INVALID_ARGUMENT "--flag=value: <bound>" for a bad value; errors loading the model pass
// through with the path. `checkpoint_tensor_bytes`, when not null, receives the sum of the
// tensors' stored sizes for a .gguf model (for the table's cross-check line).
absl::StatusOr<PlanInputs> BuildPlanInputs(const VramRequest& request, const VramLayout& layout,
                                           std::optional<int64_t>* checkpoint_tensor_bytes);
RooflineAssumptions RooflineAssumptionsFor(const VramRequest& request);

int RunVram(const VramRequest& request, std::ostream& out, std::ostream& err);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_VRAM_CLI_H_
