#include "kernels/cpu/cpu_moe.h"

#include <cstring>

#include "kernels/check.h"

namespace tpserve {

void CpuMoe::Run(const float* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
                 const Backend::ExpertMlp* shared, Activation act, const int32_t* ids,
                 const float* weights, bool weights_on_input, int64_t top_k, int64_t num_chunks,
                 const Backend::MoeWorkspace& scratch, float* out) {
  TP_CHECK(!experts.empty() && top_k >= 1 && num_chunks >= 1, "MoeExperts: nothing to run");
  const int64_t hidden = experts[0].down->rows;
  for (int64_t s = 0; s < rows * top_k; ++s) {
    TP_CHECK(ids[s] >= 0 && ids[s] < static_cast<int64_t>(experts.size()),
             "MoeExperts: an expert id outside [0, experts)");
  }
  RunExperts(x, rows, experts, /*first_expert=*/0, act, ids, weights_on_input ? weights : nullptr,
             top_k, num_chunks, scratch);
  // Slot s's chunk c: expert e's down output, a block [num_chunks, n_e, hidden] of its own.
  const auto slot_out = [&](int64_t c, int64_t s) -> const float* {
    const int64_t e = ids[s];
    const int64_t i = position_[s] - first_[e];
    return scratch.down + (num_chunks * first_[e] + c * counts_[e] + i) * hidden;
  };
  WeightedSum(rows, hidden, weights_on_input ? nullptr : weights, top_k, num_chunks, slot_out,
              out);
  AddShared(x, rows, shared, act, num_chunks, scratch, out);
}

void CpuMoe::RunSlots(const float* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
                      int64_t first_expert, Activation act, const int32_t* ids,
                      const float* input_weights, int64_t top_k, int64_t num_chunks,
                      const int32_t* slot_pos, const Backend::MoeWorkspace& scratch,
                      float* slots) {
  TP_CHECK(!experts.empty() && top_k >= 1 && num_chunks >= 1, "MoeExpertSlots: nothing to run");
  const int64_t hidden = experts[0].down->rows;
  const int64_t n = RunExperts(x, rows, experts, first_expert, act, ids, input_weights, top_k,
                               num_chunks, scratch);
  // Grouped position p holds slot order_[p]; its chunk c is in its expert's block.
  for (int64_t p = 0; p < n; ++p) {
    const int64_t s = order_[p];
    const int64_t e = ids[s] - first_expert;
    TP_CHECK(slot_pos[s] >= 0, "MoeExpertSlots: a local expert's slot has no position");
    for (int64_t c = 0; c < num_chunks; ++c) {
      std::memcpy(slots + (slot_pos[s] * num_chunks + c) * hidden,
                  scratch.down + (num_chunks * first_[e] + c * counts_[e] + p - first_[e]) * hidden,
                  hidden * sizeof(float));
    }
  }
}

void CpuMoe::Combine(const float* x, int64_t rows, const float* slots, const int32_t* slot_pos,
                     const float* weights, bool weights_on_input, int64_t top_k,
                     int64_t num_chunks, int64_t hidden, const Backend::ExpertMlp* shared,
                     Activation act, const Backend::MoeWorkspace& scratch, float* out) {
  TP_CHECK(top_k >= 1 && num_chunks >= 1, "MoeCombine: nothing to combine");
  const auto slot_out = [&](int64_t c, int64_t s) -> const float* {
    return slots + (slot_pos[s] * num_chunks + c) * hidden;
  };
  WeightedSum(rows, hidden, weights_on_input ? nullptr : weights, top_k, num_chunks, slot_out,
              out);
  AddShared(x, rows, shared, act, num_chunks, scratch, out);
}

int64_t CpuMoe::RunExperts(const float* x, int64_t rows,
                           absl::Span<const Backend::ExpertMlp> experts, int64_t first_expert,
                           Activation act, const int32_t* ids, const float* input_weights,
                           int64_t top_k, int64_t num_chunks,
                           const Backend::MoeWorkspace& scratch) {
  const int64_t num_experts = static_cast<int64_t>(experts.size());
  const int64_t hidden = experts[0].down->rows;
  const int64_t slots = rows * top_k;
  const auto local = [&](int64_t s) {
    return ids[s] >= first_expert && ids[s] < first_expert + num_experts;
  };
  // Group the local experts' slots by expert, each group in slot order:
  // order_[first_[e] .. first_[e + 1]) for local expert e (id first_expert + e).
  counts_.assign(num_experts, 0);
  for (int64_t s = 0; s < slots; ++s) {
    if (local(s)) ++counts_[ids[s] - first_expert];
  }
  first_.assign(num_experts + 1, 0);
  for (int64_t e = 0; e < num_experts; ++e) first_[e + 1] = first_[e] + counts_[e];
  const int64_t grouped = first_[num_experts];
  order_.resize(grouped);
  position_.assign(slots, -1);
  std::vector<int64_t> next(first_.begin(), first_.end() - 1);
  for (int64_t s = 0; s < slots; ++s) {
    if (!local(s)) continue;
    position_[s] = next[ids[s] - first_expert]++;
    order_[position_[s]] = s;
  }
  auto* x_rows = static_cast<float*>(scratch.x_rows);
  for (int64_t p = 0; p < grouped; ++p) {
    float* row = x_rows + p * hidden;
    std::memcpy(row, x + (order_[p] / top_k) * hidden, hidden * sizeof(float));
    // Llama 4: the slot's weight times its row goes through the expert.
    if (input_weights != nullptr) kernels_.scale(input_weights[order_[p]], hidden, row);
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
  return grouped;
}

void CpuMoe::WeightedSum(int64_t rows, int64_t hidden, const float* weights, int64_t top_k,
                         int64_t num_chunks,
                         absl::FunctionRef<const float*(int64_t c, int64_t s)> slot_out,
                         float* out) {
  // out[c, r] = w[r, 0] * slot 0 + w[r, 1] * slot 1 + ..., in slot order (slot 0 + slot 1 + ...
  // without weights).
  for (int64_t c = 0; c < num_chunks; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      float* o = out + (c * rows + r) * hidden;
      const float* first = slot_out(c, r * top_k);
      if (weights == nullptr) {
        std::memcpy(o, first, hidden * sizeof(float));
        for (int64_t j = 1; j < top_k; ++j) kernels_.add(o, slot_out(c, r * top_k + j), hidden, o);
        continue;
      }
      for (int64_t d = 0; d < hidden; ++d) o[d] = weights[r * top_k] * first[d];
      for (int64_t j = 1; j < top_k; ++j) {
        kernels_.axpy(weights[r * top_k + j], slot_out(c, r * top_k + j), hidden, o);
      }
    }
  }
}

void CpuMoe::AddShared(const float* x, int64_t rows, const Backend::ExpertMlp* shared,
                       Activation act, int64_t num_chunks, const Backend::MoeWorkspace& scratch,
                       float* out) {
  if (shared == nullptr) return;
  const int64_t hidden = shared->down->rows;
  // The routed outputs are in `out` now: the shared expert over every row reuses the scratch.
  TP_CHECK(shared->gate->cols == hidden, "MoeExperts: the shared expert's shapes disagree");
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
