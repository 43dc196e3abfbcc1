// The structured-output corpus (tests/structured/corpus.json, walks.json): each case's
// constraint as a ConstraintSpec, its prompt, a valid example output, and that example's token
// ids under SmolLM2's tokenizer (the walk a benchmark or a test feeds the matcher). Read by the
// corpus test (tests/structured) and the mask benchmark (bench/structured_bench.cc).
#ifndef TPSERVE_COORDINATOR_STRUCTURED_CORPUS_H_
#define TPSERVE_COORDINATOR_STRUCTURED_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/structured/constraint.h"

namespace tpserve {

struct CorpusCase {
  std::string name;
  ConstraintSpec spec;  // strict
  std::string prompt;
  std::string example;
  std::vector<int32_t> walk;  // the example's token ids; EOS follows
};

// Reads `corpus_path` and, when not empty, the walks of `walks_path` (matched by name).
absl::StatusOr<std::vector<CorpusCase>> LoadCorpus(const std::string& corpus_path,
                                                   const std::string& walks_path);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_CORPUS_H_
