// Terminal chat with a model on the CPU backend: tokens print as they are made, and each answer
// ends with its token counts, time to first token and decode speed.
//
//   bazel run //deploy:chat -- --model=$HOME/.cache/tpserve/SmolLM2-135M-Instruct.Q4_1.gguf
//   bazel run //deploy:chat -- --model=... --prompt="What is 2+2?"   # one answer, then exit
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "coordinator/admission.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "coordinator/validation.h"
#include "proto/tpserve.pb.h"
#include "deploy/cluster_plan.h"
#include "kernels/backend.h"
#include "worker/local_executor.h"

ABSL_FLAG(std::string, model, "", "a .gguf file or a Hugging Face model directory");
ABSL_FLAG(std::string, prompt, "", "answer this one message and exit (default: interactive)");
ABSL_FLAG(std::string, system, "", "system message (default: the template's own)");
ABSL_FLAG(int, threads, 0, "CPU threads (default: all cores)");
ABSL_FLAG(int, tp, 1, "tensor-parallel ranks inside this process");
ABSL_FLAG(int, max_new_tokens, 256, "most tokens per answer");
ABSL_FLAG(double, temperature, 0.0, "0 = greedy");
ABSL_FLAG(double, top_p, 1.0, "nucleus sampling mass, (0, 1]");
ABSL_FLAG(int, top_k, 0, "0 = off");
ABSL_FLAG(double, repetition_penalty, 1.1, "1 = off");
ABSL_FLAG(int64_t, seed, 0, "sampling seed");
ABSL_FLAG(int, context, 2048, "context window of this session, tokens");
ABSL_FLAG(std::string, weights, "",
          "hold weights as stored (default) or quantize on load: a preset of //deploy:vram's "
          "--weights (fp8, fp8-block, int4, int4-g64, bf16, q8_0, ...)");
ABSL_FLAG(std::string, kv_dtype, "f16", "KV cache dtype: f32, f16, bf16 or fp8");

namespace tpserve {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "chat: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Main() {
  const std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty()) return Fail(absl::InvalidArgumentError("--model is required"));
  absl::StatusOr<ModelBundle> bundle = LoadModelBundle(path);
  if (!bundle.ok()) return Fail(bundle.status());

  const int threads = absl::GetFlag(FLAGS_threads) > 0
                          ? absl::GetFlag(FLAGS_threads)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The KV cache is sized by the same memory plan a cluster launch uses (one conversation).
  ClusterRequest want;
  want.ranks = absl::GetFlag(FLAGS_tp);
  want.context_tokens = absl::GetFlag(FLAGS_context);
  want.max_seqs = 1;
  want.weights = absl::GetFlag(FLAGS_weights);
  absl::StatusOr<DType> kv_dtype = ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) return Fail(kv_dtype.status());
  want.kv_dtype = *kv_dtype;
  want.model_path = bundle->files.path;
  want.threads_per_rank = std::max(1, threads / std::max(1, want.ranks));
  absl::StatusOr<ClusterPlan> plan = PlanCluster(bundle->files, want);
  if (!plan.ok()) return Fail(plan.status());
  const int64_t context = plan->engine.context_length;
  // The ranks as threads of this process, loaded as a launch's ranks are.
  absl::StatusOr<RankLoad> load = RankLoadFor(*plan, want);
  if (!load.ok()) return Fail(load.status());
  absl::StatusOr<std::unique_ptr<LocalExecutor>> exec = LocalExecutor::Create(bundle->files, *load);
  if (!exec.ok()) return Fail(exec.status());
  std::fprintf(stderr, "chat: %s, %s held as %s, KV %s, %s\n",
               bundle->files.config.name.c_str(), bundle->files.weight_format.c_str(),
               plan->formats.preset.c_str(), std::string(KvDtypeName(want.kv_dtype)).c_str(),
               (*exec)->Describe().c_str());

  EngineOptions engine_options = plan->engine;
  engine_options.eos_token_ids = bundle->EosTokenIds();
  Engine engine(engine_options, *std::move(exec), &*bundle->tokenizer);

  // The same door as the servers: every turn is a GenerateRequest, admitted (validated,
  // templated, tokenized, checked against the window and the KV cache) before it runs.
  const Admitter door = bundle->Door(context, engine.kv_capacity());
  tpserve::v1::GenerateRequest turn;
  tpserve::v1::SamplingParams& sampling = *turn.mutable_sampling();
  sampling.set_temperature(static_cast<float>(absl::GetFlag(FLAGS_temperature)));
  sampling.set_top_p(static_cast<float>(absl::GetFlag(FLAGS_top_p)));
  sampling.set_top_k(absl::GetFlag(FLAGS_top_k));
  sampling.set_repetition_penalty(static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty)));
  sampling.set_seed(static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)));
  turn.set_max_new_tokens(absl::GetFlag(FLAGS_max_new_tokens));
  tpserve::v1::Chat& chat = *turn.mutable_chat();
  auto add_message = [&chat](const std::string& role, const std::string& content) {
    tpserve::v1::ChatMessage* m = chat.add_messages();
    m->set_role(role);
    m->set_content(content);
  };

  if (!absl::GetFlag(FLAGS_system).empty()) add_message("system", absl::GetFlag(FLAGS_system));
  const bool one_shot = !absl::GetFlag(FLAGS_prompt).empty();
  std::string line;
  while (true) {
    if (one_shot) {
      line = absl::GetFlag(FLAGS_prompt);
    } else {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line)) break;
      if (line.empty()) continue;
    }
    add_message("user", line);
    absl::StatusOr<AdmittedRequest> request = door.Admit(turn);
    if (!request.ok()) return Fail(request.status());

    std::string answer;
    GenerationEvent last;
    absl::StatusOr<int64_t> id = engine.Submit(*std::move(request), [&](GenerationEvent e) {
      std::fputs(e.text.c_str(), stdout);
      std::fflush(stdout);
      answer += e.text;
      if (e.finish != FinishReason::kNone) last = std::move(e);
    });
    if (!id.ok()) return Fail(id.status());
    while (engine.Step()) {
    }
    if (last.finish == FinishReason::kError) return Fail(last.error);
    const Usage& u = last.usage;
    const double decode_tps =
        u.decode_time_s > 0 ? (u.completion_tokens - 1) / u.decode_time_s : 0.0;
    std::fprintf(stderr, "\n[prompt %d tokens, output %d tokens, first token %.3f s, decode %.1f tokens/s]\n",
                 u.prompt_tokens, u.completion_tokens, u.time_to_first_token_s, decode_tps);
    add_message("assistant", answer);
    if (one_shot) break;
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Chat with a model in the terminal (CPU backend).");
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
