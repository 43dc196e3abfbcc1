// Published model shapes for the planner's tests, written out here (from each model's
// config.json on the Hugging Face Hub) so the tests check the planner's arithmetic against
// public figures independently of the presets in //model:config.
//
//   ModelSpec cfg = Llama31_405B();
//   EXPECT_EQ(KvBytesPerToken(...), 516096);
//
// Thread-safe: pure functions returning values.
#ifndef TPSERVE_PLANNER_TEST_MODELS_H_
#define TPSERVE_PLANNER_TEST_MODELS_H_

#include "model/config.h"

namespace tpserve {

ModelSpec Llama31_405B();  // meta-llama/Llama-3.1-405B
ModelSpec Llama33_70B();   // meta-llama/Llama-3.3-70B-Instruct (same shape as 3.1-70B)
ModelSpec Llama31_8B();    // meta-llama/Llama-3.1-8B
ModelSpec Llama2_7B();     // meta-llama/Llama-2-7b-hf (6,738,415,616 parameters)
ModelSpec SmolLM2_135M();  // HuggingFaceTB/SmolLM2-135M-Instruct (tied embeddings)

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_TEST_MODELS_H_
