#include "kernels/cpu/cpu_moe.h"

#include <cstring>

#include "kernels/check.h"

namespace tpserve {

void CpuMoe::Run(const float* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
                 const Backend::ExpertMlp* shared, Activation act, const int32_t* ids,
                 const float* weights, int64_t top_k, int64_t num_chunks,
                 const Backend::MoeWorkspace& scratch, float* out) {
  TP_CHECK(!experts.empty() && top_k >= 1 && num_chunks >= 1, "MoeExperts: nothing to run");
  const int64_t num_experts = static_cast<int64_t>(experts.size());
  const int64_t hidden = experts[0].down->rows;
  const int64_t slots = rows * top_k;
  // Group the slots by expert, each group in slot order: order_[first_[e] .. first_[e + 1]).
  counts_.assign(num_experts, 0);
  for (int64_t s = 0; s < slots; ++s) {
    TP_CHECK(ids[s] >= 0 && ids[s] < num_experts, "MoeExperts: an expert id outside [0, experts)");
    ++counts_[ids[s]];
  }
  first_.assign(num_experts + 1, 0);
  for (int64_t e = 0; e < num_experts; ++e) first_[e + 1] = first_[e] + counts_[e];
  order_.resize(slots);
  position_.resize(slots);
  std::vector<int64_t> next(first_.begin(), first_.end() - 1);
  for (int64_t s = 0; s < slots; ++s) {
    position_[s] = next[ids[s]]++;
    order_[position_[s]] = s;
  }
  auto* x_rows = static_cast<float*>(scratch.x_rows);
  for (int64_t p = 0; p < slots; ++p) {
    std::memcpy(x_rows + p * hidden, x + (order_[p] / top_k) * hidden, hidden * sizeof(float));
  }
  // Each expert once over its group: x_rows, gate and up in grouped order; the down output of
  // expert e a block of its own, [num_chunks, n_e, hidden] from num_chunks * first_[e] * hidden.
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t n = counts_[e];
    if (n == 0) continue;
    const Backend::ExpertMlp& mlp = experts[e];
    TP_CHECK(mlp.gate->cols == hidden && mlp.down->rows == hidden &&
                 mlp.gate->rows == mlp.up->rows && mlp.down->cols == mlp.gate->rows,
             "MoeExperts: an expert's shapes disagree with the others'");
    RunMlp(mlp, x_rows + first_[e] * hidden, n, act, num_chunks, first_[e], scratch,
           scratch.down + num_chunks * first_[e] * hidden);
  }
  // out[c, r] = w[r, 0] * slot 0 + w[r, 1] * slot 1 + ..., in slot order.
  auto slot_out = [&](int64_t c, int64_t s) {
    const int64_t e = ids[s];
    const int64_t i = position_[s] - first_[e];
    return scratch.down + (num_chunks * first_[e] + c * counts_[e] + i) * hidden;
  };
  for (int64_t c = 0; c < num_chunks; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      float* o = out + (c * rows + r) * hidden;
      const float* first = slot_out(c, r * top_k);
      for (int64_t d = 0; d < hidden; ++d) o[d] = weights[r * top_k] * first[d];
      for (int64_t j = 1; j < top_k; ++j) {
        kernels_.axpy(weights[r * top_k + j], slot_out(c, r * top_k + j), hidden, o);
      }
    }
  }
  if (shared == nullptr) return;
  // The routed outputs are in `out` now: the shared expert over every row reuses the scratch.
  TP_CHECK(shared->gate->cols == hidden && shared->down->rows == hidden,
           "MoeExperts: the shared expert's shapes disagree with the experts'");
  RunMlp(*shared, x, rows, act, num_chunks, 0, scratch, scratch.down);
  for (int64_t i = 0; i < num_chunks * rows; ++i) {
    kernels_.add(out + i * hidden, scratch.down + i * hidden, hidden, out + i * hidden);
  }
}

void CpuMoe::RunMlp(const Backend::ExpertMlp& mlp, const float* x, int64_t n, Activation act,
                    int64_t num_chunks, int64_t first_row, const Backend::MoeWorkspace& scratch,
                    float* down) {
  const int64_t ffn = mlp.gate->rows;
  float* gate = static_cast<float*>(scratch.gate) + first_row * ffn;
  float* up = static_cast<float*>(scratch.up) + first_row * ffn;
  const CpuMatMul::Output gate_up[] = {{mlp.gate, gate}, {mlp.up, up}};
  matmul_->RunMany(x, n, gate_up);
  const auto kernel = act == Activation::kSilu ? kernels_.silu_mul : kernels_.gelu_tanh_mul;
  kernel(gate, up, n * ffn, gate);
  matmul_->Run(gate, n, *mlp.down, num_chunks, down);
}

}  // namespace tpserve
