// What the engine benchmarks that serve SmolLM2 in-process share: the model (a GGUF path or
// the bundled one), a long chat prompt of a chosen length, and the median of repeated runs.
#ifndef TPSERVE_BENCH_ENGINE_BENCH_SUPPORT_H_
#define TPSERVE_BENCH_ENGINE_BENCH_SUPPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model_bundle.h"

namespace tpserve {

double Median(std::vector<double> v);

// A --threads flag's value: itself when > 0, else every core of this machine.
int BenchThreads(int flag);

// The model at `path`, or the bundled SmolLM2 when `path` is empty; `path` becomes the file
// loaded.
absl::StatusOr<ModelBundle> LoadBenchModel(std::string& path);

// A chat prompt whose system message is about `tokens` tokens of numbered bookshop rules,
// then `question` from the user.
absl::StatusOr<std::vector<int32_t>> ShopPrompt(const ModelBundle& bundle, int tokens,
                                                const std::string& question);

}  // namespace tpserve

#endif  // TPSERVE_BENCH_ENGINE_BENCH_SUPPORT_H_
