#include "bench/engine_bench_support.h"

#include <algorithm>
#include <thread>

#include "base/status_macros.h"
#include "model/bundled_model.h"

namespace tpserve {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int BenchThreads(int flag) {
  return flag > 0 ? flag : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

absl::StatusOr<ModelBundle> LoadBenchModel(std::string& path) {
  if (path.empty()) {
    TP_ASSIGN_OR_RETURN(path, BundledModelPath());
  }
  return LoadModelBundle(path);
}

absl::StatusOr<std::vector<int32_t>> ShopPrompt(const ModelBundle& bundle, int tokens,
                                                const std::string& question) {
  std::string system = "You are the assistant of a bookshop. Follow these rules.";
  const int num_rules = tokens / 17;  // each rule is about 17 tokens
  for (int i = 1; i <= num_rules; ++i) {
    system += " Rule " + std::to_string(i) + ": shelf " + std::to_string(i * 7 % 97) +
              " holds books on topic " + std::to_string(i * 13 % 89) + ".";
  }
  return bundle.EncodeChat({{"system", system}, {"user", question}});
}

}  // namespace tpserve
