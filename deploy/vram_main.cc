// vram: per-GPU memory and speed plan for serving a Llama model with tensor parallelism.
//
//   bazel run //deploy:vram -- --model=405b --weights=fp8 --gpus=8 --context=8192 --users=10
//   bazel run //deploy:vram -- --model=70b --weights=bf16 --gpu=h200 --context=32768 --fit
//   bazel run //deploy:vram -- --model=405b --weights=fp8 --gpus=4,8,8x2 --context=8192
//       --users=10 --report=capacity.html   (a relative path is where bazel run was typed)
//
// Exit codes: 0 fits, 1 does not fit (the output says by how much and suggests changes),
// 2 bad flags. The planning itself lives in //planner (see docs/CAPACITY.md).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "planner/strict_flags.h"
#include "planner/vram_cli.h"

ABSL_FLAG(std::string, model, "",
          "model: a preset (405b, 70b, 8b, smollm2, ...), a config.json (or its directory), "
          "or a .gguf file");
ABSL_FLAG(std::vector<std::string>, weights, {},
          "weight format preset: f32, fp16, bf16, fp8, fp8-block, int4, int4-g<N>, q8_0, q4_0, "
          "q4_1, q4_k, q5_k, q6_k (default bf16; a .gguf defaults to its own tensor types); the "
          "same names as the engine's --weights. Several (fp8,int4) compare formats");
ABSL_FLAG(std::string, draft_model, "",
          "speculative decoding's draft model, as --model (same vocabulary), or mtp (the model's "
          "own multi-token-prediction layer, --speculative=mtp: its weights, its one layer's "
          "latent and the target's hidden state per token): adds its weights, step buffers and "
          "KV to every rank and shows what it takes from the KV cache");
ABSL_FLAG(std::string, draft_weights, "",
          "the draft model's weight format preset, as --weights (default bf16, or the GGUF's)");
ABSL_FLAG(std::string, role_formats, "",
          "per-role overrides, e.g. embedding=q8_0,lm_head=bf16 (roles: embedding, attn_norm, "
          "q, k, v, o, ffn_norm, gate, up, down, final_norm, lm_head)");
ABSL_FLAG(std::string, kv_dtype, "auto",
          "KV cache dtype: auto (as launch: bf16 on GPUs, f16 on --gpu=cpu-host), f32, f16, "
          "bf16, fp8 (the engine's --kv_dtype)");
ABSL_FLAG(std::string, activations, "",
          "activation dtype: f32, f16, bf16 (default bf16; f32 on cpu-host)");
ABSL_FLAG(std::vector<std::string>, gpus, {"1"},
          "devices in total = tensor-parallel degree x --pp, or TPxPP (8x2: tp 8, 2 pipeline "
          "stages). Several (4,8,8x2) compare layouts: each is planned and printed");
ABSL_FLAG(int64_t, pp, 1, "pipeline stages (must divide --gpus and the layer count)");
ABSL_FLAG(std::string, gpu, "h100-80g",
          "device: a100-40g, a100-40g-pcie, a100-80g, h100-80g, h100-pcie, h200, b200, l40s, "
          "rtx4090, or cpu-host (needs --host_bandwidth_gbs)");
ABSL_FLAG(int64_t, context, 0, "max tokens per sequence, prompt + output (0: the model's)");
ABSL_FLAG(int64_t, users, 1, "target concurrent sequences, each at --context tokens");
ABSL_FLAG(int64_t, max_tokens_per_step, 0,
          "tokens batched per step (chunked prefill); 0 = launch's default for the device: 2048 "
          "on GPUs, 512 with --gpu=cpu-host");
ABSL_FLAG(int64_t, max_seqs_per_step, 256, "sequences per step (rows of logits)");
ABSL_FLAG(int64_t, block_size, 16, "KV cache block size in tokens");
ABSL_FLAG(bool, deterministic_tp, false,
          "plan the engine's --deterministic_tp reduction (chunked f32 all-gather)");
ABSL_FLAG(bool, enforce_eager, false,
          "plan the engine's --enforce_eager: no recorded decode steps (CUDA graphs) to count");
ABSL_FLAG(int64_t, deterministic_tp_chunks, 0,
          "the engine's --deterministic_tp_chunks (0: its default)");
ABSL_FLAG(bool, expert_parallel, false,
          "mixture-of-experts models: plan the engine's --expert_parallel (whole experts per "
          "GPU, the shared expert on every GPU)");
ABSL_FLAG(bool, attention_dp, false,
          "plan the engine's --attention_dp (the whole attention on every GPU, each caching its "
          "own sequences); an MLA model's report compares both attention layouts either way");
ABSL_FLAG(double, gpu_memory_gib, 0, "override the device memory (GiB); 0: preset");
ABSL_FLAG(double, bandwidth_gbs, 0, "override the memory bandwidth (GB/s); 0: preset");
ABSL_FLAG(double, peak_tflops, 0, "override the dense bf16 peak (TFLOP/s); 0: preset");
ABSL_FLAG(double, link_gbs, 0, "override the interconnect bandwidth per direction (GB/s)");
ABSL_FLAG(double, link_latency_us, -1, "override the per-collective latency (us)");
ABSL_FLAG(double, reserve_gib, -1, "override the runtime reserve per device (GiB)");
ABSL_FLAG(double, safety, -1, "override the safety fraction, in [0, 1)");
ABSL_FLAG(double, host_bandwidth_gbs, 0, "cpu-host: measured memory bandwidth (GB/s)");
ABSL_FLAG(double, host_peak_gflops, 0,
          "cpu-host: peak GFLOP/s (0: cores x 2.5 GHz x 32 FLOP/cycle, an assumption)");
ABSL_FLAG(std::string, meminfo, "/proc/meminfo", "cpu-host: where MemTotal is read from");
ABSL_FLAG(double, prefill_efficiency, 0.5, "fraction of peak FLOP/s a prefill reaches");
ABSL_FLAG(double, decode_efficiency, 1.0,
          "fraction of the memory bandwidth decode reaches (1 = roofline; measure it: "
          "bench/model_bench prints it for a CPU rank)");
ABSL_FLAG(int64_t, prompt_tokens, 0, "prompt length for the prefill estimate (0: --context)");
ABSL_FLAG(bool, fit, false, "find the fewest devices of --gpu that meet the target");
ABSL_FLAG(int64_t, max_gpus, 64, "--fit: largest device count considered");
ABSL_FLAG(bool, allow_pipeline, false, "--fit: also consider pipeline stages");
ABSL_FLAG(bool, json, false, "print JSON instead of the table");
ABSL_FLAG(std::string, report, "",
          "also write the capacity report to this HTML file: memory bars per layout, capacity "
          "against context, roofline speed, the verdict (self-contained; docs/CAPACITY.md)");
ABSL_FLAG(std::string, svg, "", "also write the memory chart alone to this SVG file");

namespace {

// The command as typed, for the report: "vram --model=405b ...", arguments with spaces or
// shell characters single-quoted.
std::string CommandLine(int argc, char** argv) {
  std::string out = "vram";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool plain = arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789-_=.,/:+@%") == std::string::npos;
    if (plain) {
      out += " " + arg;
      continue;
    }
    out += " '";
    for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += "'";
  }
  return out;
}

tpserve::VramRequest RequestFromFlags() {
  tpserve::VramRequest r;
  r.model = absl::GetFlag(FLAGS_model);
  r.weights = absl::GetFlag(FLAGS_weights);
  r.draft_model = absl::GetFlag(FLAGS_draft_model);
  r.draft_weights = absl::GetFlag(FLAGS_draft_weights);
  r.role_formats = absl::GetFlag(FLAGS_role_formats);
  r.kv_dtype = absl::GetFlag(FLAGS_kv_dtype);
  r.activations = absl::GetFlag(FLAGS_activations);
  r.gpus = absl::GetFlag(FLAGS_gpus);
  r.pp = absl::GetFlag(FLAGS_pp);
  r.gpu = absl::GetFlag(FLAGS_gpu);
  r.context = absl::GetFlag(FLAGS_context);
  r.users = absl::GetFlag(FLAGS_users);
  r.max_tokens_per_step = absl::GetFlag(FLAGS_max_tokens_per_step);
  r.max_seqs_per_step = absl::GetFlag(FLAGS_max_seqs_per_step);
  r.block_size = absl::GetFlag(FLAGS_block_size);
  r.deterministic_tp = absl::GetFlag(FLAGS_deterministic_tp);
  r.enforce_eager = absl::GetFlag(FLAGS_enforce_eager);
  r.deterministic_tp_chunks = absl::GetFlag(FLAGS_deterministic_tp_chunks);
  r.expert_parallel = absl::GetFlag(FLAGS_expert_parallel);
  r.attention_dp = absl::GetFlag(FLAGS_attention_dp);
  r.gpu_memory_gib = absl::GetFlag(FLAGS_gpu_memory_gib);
  r.bandwidth_gbs = absl::GetFlag(FLAGS_bandwidth_gbs);
  r.peak_tflops = absl::GetFlag(FLAGS_peak_tflops);
  r.link_gbs = absl::GetFlag(FLAGS_link_gbs);
  r.link_latency_us = absl::GetFlag(FLAGS_link_latency_us);
  r.reserve_gib = absl::GetFlag(FLAGS_reserve_gib);
  r.safety = absl::GetFlag(FLAGS_safety);
  r.host_bandwidth_gbs = absl::GetFlag(FLAGS_host_bandwidth_gbs);
  r.host_peak_gflops = absl::GetFlag(FLAGS_host_peak_gflops);
  r.meminfo = absl::GetFlag(FLAGS_meminfo);
  r.prefill_efficiency = absl::GetFlag(FLAGS_prefill_efficiency);
  r.decode_efficiency = absl::GetFlag(FLAGS_decode_efficiency);
  r.prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  r.fit = absl::GetFlag(FLAGS_fit);
  r.max_gpus = absl::GetFlag(FLAGS_max_gpus);
  r.allow_pipeline = absl::GetFlag(FLAGS_allow_pipeline);
  r.json = absl::GetFlag(FLAGS_json);
  r.report = absl::GetFlag(FLAGS_report);
  r.svg = absl::GetFlag(FLAGS_svg);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<std::vector<std::string>> positional = tpserve::ParseFlagsStrict(argc, argv);
  if (!positional.ok() && absl::IsNotFound(positional.status())) {
    std::cout << "usage: vram --model=<preset|config.json|file.gguf> [flags]\n"
              << tpserve::FlagsUsage("deploy/vram_main.cc");
    return 0;
  }
  if (!positional.ok()) {
    std::cerr << "vram: " << positional.status().message() << "\n";
    return 2;
  }
  if (!positional->empty()) {
    std::cerr << "vram: unexpected argument \"" << positional->front()
              << "\"; flags take the form --name=value\n";
    return 2;
  }
  tpserve::VramRequest request = RequestFromFlags();
  request.command_line = CommandLine(argc, argv);
  // `bazel run` starts us in the runfiles tree: files named relative to where it was typed.
  if (const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY"); cwd != nullptr) {
    for (std::string* path : {&request.report, &request.svg}) {
      if (!path->empty() && path->front() != '/') *path = std::string(cwd) + "/" + *path;
    }
  }
  return tpserve::RunVram(request, std::cout, std::cerr);
}
