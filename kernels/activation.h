// The gated activations of a transformer's MLP, out = act(gate) * up: the one name of the
// concept that the model description (model/config.h) sets per family and every backend
// computes (Backend::GatedActivation).
#ifndef TPSERVE_KERNELS_ACTIVATION_H_
#define TPSERVE_KERNELS_ACTIVATION_H_

#include <cstdint>
#include <string_view>

namespace tpserve {

enum class Activation : uint8_t {
  kSilu,      // SwiGLU: gate / (1 + exp(-gate)) (Llama, Qwen, Mistral)
  kGeluTanh,  // GeGLU with the tanh approximation (Gemma's gelu_pytorch_tanh):
              // 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) = g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3)))
};

inline std::string_view ActivationName(Activation a) {
  return a == Activation::kSilu ? "silu" : "gelu_tanh";
}

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_ACTIVATION_H_
