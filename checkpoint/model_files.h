// Opens a model from a path the way operators name it: a `.gguf` file, or a Hugging Face
// directory (config.json + safetensors, single or sharded). Returns the config and the weights;
// tokenizer data stays with the files (the GGUF metadata, or tokenizer.json in the directory).
//
//   TP_ASSIGN_OR_RETURN(ModelFiles files, OpenModelFiles("/models/SmolLM2.gguf"));
//   files.config.num_layers;  files.weights->Find("blk.0.attn_q.weight");
//
// Thread-safety: the returned objects are immutable and safe to share across threads.
#ifndef TPSERVE_CHECKPOINT_MODEL_FILES_H_
#define TPSERVE_CHECKPOINT_MODEL_FILES_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/quant_scheme.h"
#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "model/config.h"
#include "model/weight_formats.h"

namespace tpserve {

struct ModelFiles {
  std::string path;
  ModelSpec config;
  std::shared_ptr<const WeightSource> weights;
  // Set for a GGUF model (it is also `weights`): its metadata holds the tokenizer.
  std::shared_ptr<const GgufFile> gguf;
  // Set for a Hugging Face directory: where tokenizer.json is.
  std::string hf_directory;
  // "gguf:Q4_1" style summary of the dominant weight type, for reports; for a quantized
  // Hugging Face checkpoint the method and the FFN's format ("safetensors:awq int4-g128").
  std::string weight_format;
  // How the checkpoint stores quantized linears (its quantization_config; none for GGUF).
  QuantScheme scheme;
  // The format each role is stored in, read off the tensors.
  WeightFormats stored_formats;
};

// NOT_FOUND naming the path when nothing usable is there; the readers' errors otherwise.
absl::StatusOr<ModelFiles> OpenModelFiles(const std::string& path);

// `target`'s files as its multi-token-prediction draft (MtpDraftSpec) sees them: the same
// weights, the draft's description and the formats its tensors are stored in. MtpDraftSpec's
// FAILED_PRECONDITION where the model has no such layer; NOT_FOUND naming a missing tensor.
absl::StatusOr<ModelFiles> MtpDraftFiles(const ModelFiles& target);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_MODEL_FILES_H_
