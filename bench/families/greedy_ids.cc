// Greedy token ids of a GGUF model on the CPU backend, for checking that tpserve and llama.cpp
// compute the same model (bench/families/greedy_check.py runs this and llama.cpp on the same
// ids and compares). The prompt is --prompt_tokens ids of the benches' formula
// (i * 7919 + 13) % vocab unless --prompt gives comma-separated ids.
//
//   bazel run -c opt //bench/families:greedy_ids -- --model=FILE.gguf --new_tokens=16
// prints one line: the generated ids, space-separated.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "checkpoint/model_files.h"
#include "checkpoint/stored_formats.h"
#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "worker/generate.h"
#include "worker/llama_model.h"

ABSL_FLAG(std::string, model, "", "GGUF path");
ABSL_FLAG(std::string, prompt, "", "comma-separated prompt ids (default: the benches' formula)");
ABSL_FLAG(int64_t, prompt_tokens, 32, "prompt length when --prompt is empty");
ABSL_FLAG(int64_t, new_tokens, 16, "greedy tokens to generate");
ABSL_FLAG(int, threads, 2, "CPU threads");
ABSL_FLAG(std::string, kv_dtype, "f16", "KV cache dtype");
ABSL_FLAG(std::string, logits_out, "",
          "also write the logits after the last prompt token here (raw f32)");

namespace tpserve {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  return 1;
}

int Main() {
  auto files = OpenModelFiles(absl::GetFlag(FLAGS_model));
  if (!files.ok()) return Fail(files.status());
  auto formats = ResolveWeightFormats(files->stored_formats, "", files->config, 1);
  if (!formats.ok()) return Fail(formats.status());
  auto kv_dtype = ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) return Fail(kv_dtype.status());
  std::vector<int32_t> prompt;
  if (!absl::GetFlag(FLAGS_prompt).empty()) {
    for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_prompt), ',')) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(t, &id)) return Fail(absl::InvalidArgumentError("bad --prompt id"));
      prompt.push_back(id);
    }
  } else {
    for (int64_t i = 0; i < absl::GetFlag(FLAGS_prompt_tokens); ++i) {
      prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % files->config.vocab_size));
    }
  }
  const int64_t new_tokens = absl::GetFlag(FLAGS_new_tokens);
  CpuBackend backend(CpuBackendOptions{.num_threads = absl::GetFlag(FLAGS_threads)});
  SingleRankCommunicator comm;
  LlamaLoadOptions load;
  load.max_tokens_per_step = static_cast<int64_t>(prompt.size());
  load.formats = *formats;
  load.scheme = files->scheme;
  auto model = LlamaModel::Load(files->config, *files->weights, {0, 1}, &backend, &comm, load);
  if (!model.ok()) return Fail(model.status());
  const int64_t block = 16;
  const int64_t total = static_cast<int64_t>(prompt.size()) + new_tokens;
  auto cache =
      KvCache::Create((*model)->KvShape((total + block - 1) / block, block, *kv_dtype), backend);
  if (!cache.ok()) return Fail(cache.status());
  auto r = GenerateGreedy(**model, cache->get(), prompt,
                          GenerateOptions{.max_new_tokens = new_tokens});
  if (!r.ok()) return Fail(r.status());
  if (const std::string out = absl::GetFlag(FLAGS_logits_out); !out.empty()) {
    std::ofstream(out, std::ios::binary)
        .write(reinterpret_cast<const char*>(r->prompt_last_logits.data()),
               static_cast<std::streamsize>(r->prompt_last_logits.size() * sizeof(float)));
  }
  for (size_t i = 0; i < r->tokens.size(); ++i) {
    std::printf(i ? " %d" : "%d", r->tokens[i]);
  }
  std::printf("\n");
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
