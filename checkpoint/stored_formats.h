// The format each tensor role of a checkpoint is stored in, read off the checkpoint itself:
// GGUF tensor types, safetensors dtypes, or the quantization scheme of its config. The engine
// holds weights in these formats unless asked to quantize on load.
//
//   TP_ASSIGN_OR_RETURN(WeightFormats stored, StoredWeightFormats(source, scheme, config));
//
// Thread-safe: pure function over immutable inputs.
#ifndef TPSERVE_CHECKPOINT_STORED_FORMATS_H_
#define TPSERVE_CHECKPOINT_STORED_FORMATS_H_

#include "absl/status/statusor.h"
#include "checkpoint/quant_scheme.h"
#include "formats/weight_source.h"
#include "model/config.h"
#include "model/weight_formats.h"

namespace tpserve {

// Preset "checkpoint"; layers stored differently from layer 0 become per-layer overrides.
// The errors of StoredMatrix::Open (a missing or malformed tensor).
absl::StatusOr<WeightFormats> StoredWeightFormats(const WeightSource& source,
                                                  const QuantScheme& scheme,
                                                  const ModelSpec& config);

// The formats to hold weights in on `tp` ranks: `stored` for "" or "checkpoint", else the
// named preset (quantize on load: "fp8", "int4", "int4-g64", "bf16", ...; plain "int4" with its
// group fitted to the model, FitInt4Groups). INVALID_ARGUMENT lists the names.
absl::StatusOr<WeightFormats> ResolveWeightFormats(const WeightFormats& stored,
                                                   std::string_view preset,
                                                   const ModelSpec& config, int tp);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_STORED_FORMATS_H_
