// Test checkpoints written to disk: a safetensors file from tensor views, and a Hugging Face
// text model's directory rewritten as the multimodal checkpoint of it that
// Llama4ForConditionalGeneration saves (the text model's keys under text_config, its tensors
// under a prefix, beside a vision tower's).
//
//   TP_RETURN_IF_ERROR(WriteMultimodalCheckpoint("tests/golden/families/llama4_hf", dir,
//                                                "llama4", "language_model."));
//
// Thread-compatible: plain functions writing the files they are given.
#ifndef TPSERVE_CHECKPOINT_TESTING_MULTIMODAL_CHECKPOINT_H_
#define TPSERVE_CHECKPOINT_TESTING_MULTIMODAL_CHECKPOINT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "formats/weight_source.h"

namespace tpserve {

// `tensors` as one safetensors file at `path`, in the given order and names. INTERNAL when the
// file cannot be written.
absl::Status WriteSafetensors(const std::string& path, absl::Span<const TensorView> tensors);

// out_dir/config.json: {"architectures": ["Llama4ForConditionalGeneration"], "model_type":
// model_type, "text_config": text_dir's config.json, "vision_config": {...},
// "tie_word_embeddings": its}; out_dir/model.safetensors: every tensor of text_dir under
// `text_prefix`, then vision_model.patch_embedding.linear.weight F32 [8, 4] and
// multi_modal_projector.linear_1.weight F32 [hidden, 8], which a text model does not read.
// out_dir must exist. Errors of reading text_dir pass through.
absl::Status WriteMultimodalCheckpoint(const std::string& text_dir, const std::string& out_dir,
                                       std::string_view model_type,
                                       std::string_view text_prefix);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_TESTING_MULTIMODAL_CHECKPOINT_H_
