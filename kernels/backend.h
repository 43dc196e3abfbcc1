// The compute seam between the model and the hardware: memory, copies and the handful of ops a
// Llama forward pass needs, behind one interface that the CPU backend (kernels/cpu/) and the
// CUDA backend (kernels/cuda/) both implement.
//
//   std::unique_ptr<Backend> be = *CreateBackend({.kind = BackendKind::kCpu, .num_threads = 2});
//   DeviceBuffer x = *be->Allocate(tokens * hidden * ActivationBytes(*be), "x");
//   be->BeginStep(step);                  // token ids, positions, block tables: once per step
//   be->EmbeddingRows(embedding, 0, x.data());
//   be->MatMul(x.data(), tokens, wq, q.data(), be->activation_dtype());
//
// Memory: every pointer argument is BACKEND memory (device memory for a GPU backend, host
// memory for the CPU one) unless the comment says "host". The backend owns allocation
// (Allocate), host<->device copies and its stream; the model never assumes host memory.
// Activations are in activation_dtype() (f32 on the CPU, bf16 on the GPU); logits and
// reduction partial sums are f32.
// Per-step metadata (token ids, positions, the sequences' block tables, the rows that need
// logits) is handed over once per step with BeginStep: ops that need it read the current step,
// so a GPU backend uploads it once (and a captured step can replay over new metadata).
// Errors: shapes and types are the caller's contract (REQUIRES lines); violating them is a
// programmer error. Callers check capabilities (SupportsWeight, SupportsKvDtype) once at load
// time, so ops return nothing; asynchronous failures (a device fault) surface at Synchronize().
// Threading: one caller thread at a time per Backend instance; the backend may use its own
// worker threads inside an op. Ops run in call order.
#ifndef TPSERVE_KERNELS_BACKEND_H_
#define TPSERVE_KERNELS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "formats/dtype.h"
#include "formats/tensor_format.h"
#include "kernels/activation.h"
#include "kernels/expert_routing.h"
#include "kernels/sampling_rows.h"
#include "kernels/weight_matrix.h"

namespace tpserve {

class Backend;

enum class BackendKind : uint8_t { kCpu, kCuda };
std::string_view BackendKindName(BackendKind kind);  // "cpu", "cuda"
absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name);

// A block of backend memory, freed by the backend that made it. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* owner, void* data, int64_t bytes)
      : owner_(owner), data_(data), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void Reset();

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

// How the model uses a weight matrix it places with Backend::PlaceWeight.
enum class WeightUse : uint8_t {
  kMatMul,  // only multiplied (MatMul, MatMulMany, MatMulChunked): the backend may keep a form
            // of its own instead of the stored one (the CUDA backend's mixed-input GEMM layout,
            // the CPU backend's interleaved Q8_0, Q4_0/1 and Q5_0/1 row groups)
  kTable,   // read by EmbeddingRows as well (an embedding, maybe tied to the LM head): the
            // stored form stays
  kFused,   // as kMatMul, and multiplied only as MatMulMany's `fused` matrix (the q/k/v or
            // gate/up slices stacked along n: model/fused_projections.h): a backend may set
            // aside the scratch its product needs for a step budget's rows here, at load
};

// A weight matrix in backend memory, as Backend::PlaceWeight made it: `matrix` points into
// `buffers`, into the host matrix's bytes (views of a checkpoint on a host-memory backend),
// and at the backend's own form (matrix.prepared, owned by `prepared`). Move-only; moving keeps
// `matrix` valid (vector and shared_ptr moves keep their heap objects).
struct PlacedWeight {
  WeightMatrix matrix;
  std::vector<DeviceBuffer> buffers;
  std::shared_ptr<const void> prepared;  // owns matrix.prepared; null when there is none
  int64_t bytes_viewed = 0;  // host bytes used in place, not copied
  int64_t bytes_copied = 0;  // backend memory allocated for it: the sizes of `buffers`
  // What the rank really holds for this matrix (the memory plan's figure for it).
  int64_t bytes_held() const { return bytes_viewed + bytes_copied; }
};

// How RoPE pairs the elements of one head. GGUF checkpoints pair neighbours (llama.cpp permutes
// the Q/K rows at conversion to make that equivalent); Hugging Face checkpoints pair element i
// with element i + head_dim / 2 ("rotate half").
enum class RopeLayout {
  kInterleaved,  // pairs (2i, 2i+1)
  kRotateHalf,   // pairs (i, i + head_dim/2)
};

// One sequence's slice of a step.
struct AttentionSequence {
  int64_t first_row = 0;          // index of its first token row in the step
  int64_t num_query_tokens = 0;   // n: rows first_row .. first_row + n - 1
  int64_t start_position = 0;     // position of its first token; token i sits at start + i
  // Logical block -> physical block in the KV pools (host memory). Must cover positions
  // [0, start_position + num_query_tokens).
  absl::Span<const int32_t> block_table;
  // A row the batch was padded with to reach a captured batch size (RunCaptured): one query
  // token, no KV write, zeros as its attention output; its block table may be empty.
  bool padding = false;
};

// What every op of one step shares; host memory that must stay valid until the next BeginStep.
struct StepInputs {
  absl::Span<const int32_t> token_ids;        // [T]
  absl::Span<const int32_t> positions;        // [T]
  absl::Span<const AttentionSequence> seqs;   // rows in step order, covering [0, T)
  absl::Span<const int32_t> logit_rows;       // rows whose hidden state feeds the LM head
};

// KV cache dtypes (IsKvDtype, ParseKvDtype, KvDtypeName): formats/tensor_format.h.

// A paged KV pool of one layer: [num_blocks][block_size_tokens][num_kv_heads][head_dim] of
// `dtype`, in backend memory.
struct KvPoolView {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
  float k_scale = 1.0f;  // fp8 only: stored code = value / scale
  float v_scale = 1.0f;
  int64_t num_blocks = 0;
  int64_t block_size_tokens = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- Capabilities (cheap, no side effects) ----

  // Short name for logs and reports, e.g. "cpu-avx2" or "cuda:0 NVIDIA H200".
  virtual std::string_view name() const = 0;
  virtual BackendKind kind() const = 0;
  // The element type of activation buffers: kF32 or kBF16.
  virtual DType activation_dtype() const = 0;
  // Whether MatMul (and EmbeddingRows, for tables) accept weights stored in `format`.
  virtual bool SupportsWeight(const TensorFormat& format) const = 0;
  virtual bool SupportsKvDtype(DType dtype) const = 0;
  // True when backend memory is host memory: weights may then be used in place (mmapped
  // checkpoint bytes) instead of being copied in.
  virtual bool host_memory() const = 0;

  // ---- Memory ----

  // RESOURCE_EXHAUSTED naming `what` and the size when the memory is not there.
  virtual absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes, std::string_view what) = 0;
  // Host -> backend; `src` (host) may be reused once the call returns.
  virtual void CopyToDevice(void* dst, const void* src, int64_t bytes) = 0;
  // Backend -> host; waits for the queued work that produces `src`.
  virtual absl::Status CopyToHost(void* dst, const void* src, int64_t bytes) = 0;
  // Backend -> backend, in stream order: `rows` rows of `row_bytes`, strided.
  virtual void Copy2D(void* dst, int64_t dst_stride_bytes, const void* src,
                      int64_t src_stride_bytes, int64_t row_bytes, int64_t rows) = 0;
  virtual void FillZero(void* dst, int64_t bytes) = 0;

  // Puts a weight matrix (host memory: values, scales, zero points, permutation) where this
  // backend multiplies it, in the form it multiplies fastest, once, at load. The default,
  // PlaceStoredWeight: the stored form, parts the HostMatrix only views (a checkpoint's mmapped
  // bytes) used in place on a host-memory backend, the rest uploaded. The CUDA backend holds
  // int4 matrices the mixed-input GEMM takes in that GEMM's layout instead of the stored one,
  // and fp8 ones with that GEMM's scales beside their codes (kernels/cuda/weight_placement.h,
  // which the memory plan counts the same bytes with). `what` names the matrix in errors.
  // RESOURCE_EXHAUSTED naming `what` when backend memory runs out.
  // REQUIRES: SupportsWeight(host.matrix.format); `host` outlives the result when views are
  // kept (host_memory() backends).
  virtual absl::StatusOr<PlacedWeight> PlaceWeight(const HostMatrix& host, WeightUse use,
                                                   std::string_view what);

  // The stream ops are queued on (a cudaStream_t), for communicators that enqueue their
  // collectives in order with the ops; nullptr for the CPU backend.
  virtual void* stream() const = 0;
  // Frees memory from Allocate; called by DeviceBuffer.
  virtual void Free(void* data, int64_t bytes) = 0;

  // ---- Step metadata ----

  // Makes `step` the current step: ops below that read token ids, positions, sequences or
  // logit rows read these (a GPU backend uploads them here, once).
  // REQUIRES: the spans stay valid until the next BeginStep; block tables name blocks of the
  // pools the ops get.
  virtual void BeginStep(const StepInputs& step) = 0;

  // ---- Ops (x, y, ...: activation_dtype() unless stated) ----

  // y[m, n] = x[m, k] * W^T (+ w.bias[n] on every row where the matrix has one: the f32 sum
  // plus the bias, rounded once) with n = w.rows, k = w.cols; y is `y_dtype`, which is
  // activation_dtype() or kF32 (logits). x and y must not overlap. Backends may quantize x
  // internally (the CPU multiplies GGML weights against 8-bit activation blocks).
  // REQUIRES: SupportsWeight(w.format), m >= 0, k a multiple of InputBlockValues(w.format)
  // (fp8-block excepted: its last 128-column tile may be partial, as checkpoints store it).
  virtual void MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y,
                      DType y_dtype) = 0;

  // Several matrices against the same x in one op (Q/K/V, gate/up): outs[i].y = x * outs[i].w^T.
  // Each output is bit-identical to MatMul of that matrix alone; a backend may share the work
  // of x between them (the CPU quantizes x once and runs every matrix's tiles in one parallel
  // pass). The default runs MatMul per matrix.
  // `fused` (nullptr: none) is the outs' matrices stacked along n in their order, placed as one
  // matrix (WeightUse::kFused), which the loader lays out where projection_fusion() asks for it
  // and model/fused_projections.h allows: outs[i].w is then a view of rows [n_i, n_i + rows_i)
  // of it (its data null where the backend's own form replaced the stored one). A backend that
  // fuses multiplies `fused` once and hands each output its columns of the product; its outputs
  // are then that product's columns, bit-identical to MatMul alone wherever the backend's
  // floats do not depend on n (the CPU; the CUDA backend's deterministic mode; elsewhere within
  // the GEMM's rounding). The default, and a backend that does not fuse, multiply the views.
  // REQUIRES: as MatMul for each, and every w has the same cols; with `fused`, the outs' rows
  // add up to fused->rows and outs[i].w->bias (if any) is fused->bias + n_i.
  struct MatMulOut {
    const WeightMatrix* w;
    void* y;
  };
  virtual void MatMulMany(const void* x, int64_t m, absl::Span<const MatMulOut> outs,
                          DType y_dtype, const WeightMatrix* fused) {
    (void)fused;
    for (const MatMulOut& o : outs) MatMul(x, m, *o.w, o.y, y_dtype);
  }
  // Whether MatMulMany runs a `fused` matrix as one GEMM (so the loader should stack q/k/v and
  // gate/up for this backend), and the row multiple each stacked part must keep for the stack
  // to be held in the same form, and so the same bytes, as its parts would be
  // (model/fused_projections.h checks it). The default: no fusion.
  struct ProjectionFusion {
    bool fuses = false;
    int64_t part_row_multiple = 1;
    // Kernels a fused MatMulMany launches besides its one GEMM (the CUDA backend's split of the
    // product into the outputs): what worker/step_launches.h counts for it.
    int64_t split_launches = 0;
  };
  virtual ProjectionFusion projection_fusion() const { return {}; }

  // The input dimension cut into `num_chunks` equal chunks, each multiplied on its own:
  // y[c, m, n] = x[:, chunk c] * W[:, chunk c]^T in f32. Chunk c's result must be
  // bit-identical to MatMul of that chunk alone (the chunk's columns placed as a weight of
  // their own, PlaceWeight of CopyColumnChunk, as a rank's loader places its slice):
  // row-parallel layers sum chunks in a fixed order so that every tensor-parallel degree gives
  // the same floats (worker/llama_model.cc).
  // REQUIRES: as MatMul, (w.cols / num_chunks) % InputBlockValues(w.format) == 0, and no
  // w.bias (row-parallel layers have none: a bias belongs to the reduced sum).
  virtual void MatMulChunked(const void* x, int64_t m, const WeightMatrix& w,
                             int64_t num_chunks, float* y) = 0;

  // out[i] = ((chunks[0][i] + chunks[1][i]) + chunks[2][i]) + ... in f32 for i < count,
  // rounded once to activation_dtype(). chunks is f32 [num_chunks, count].
  virtual void SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) = 0;

  // y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:] for r < rows; x, y [rows, dim];
  // weight is f32 [dim]. y may equal x (in place).
  virtual void RmsNorm(const void* x, const float* weight, int64_t rows, int64_t dim, float eps,
                       void* y) = 0;

  // Rotates x[T, num_heads, head_dim] in place: row r by angle positions[r] * inv_freq[i] for
  // pair i (inv_freq: f32 [head_dim / 2], see rope_table.h). T and positions: the step's.
  virtual void Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
                    RopeLayout layout) = 0;

  // out[i] = act(gate[i]) * up[i] for i < count (SwiGLU, GeGLU: kernels/activation.h); out
  // may alias gate or up.
  virtual void GatedActivation(Activation act, const void* gate, const void* up, int64_t count,
                               void* out) = 0;

  // ---- Mixtures of experts (SupportsExperts(); a model with MoE layers is refused at load on
  // a backend without them) ----

  // This rank's share of one expert's gated MLP (tensor-parallel slices: gate and up
  // [local_ffn, hidden], down [hidden, local_ffn]).
  struct ExpertMlp {
    const WeightMatrix* gate;
    const WeightMatrix* up;
    const WeightMatrix* down;
  };
  virtual bool SupportsExperts() const = 0;
  // Step buffers MoeExperts works in, for rows tokens of top_k slots (model/step_buffers.h
  // sizes them, so the memory plan counts them): the slots' input rows grouped by expert
  // (activation_dtype() [rows * top_k, hidden]), their gate and up outputs ([rows * top_k,
  // local_ffn] each; the shared expert's rows * its width when larger), and their down outputs
  // (f32, num_chunks * rows * top_k * hidden).
  struct MoeWorkspace {
    void* x_rows;
    void* gate;
    void* up;
    float* down;
  };

  // ids [rows, routing.top_k] (int32) and weights [rows, routing.top_k] (f32) from the router
  // logits (f32 [rows, routing.num_experts]) by kernels/expert_routing.h's rules, exactly
  // RouteTokens; correction_bias f32 [num_experts] or nullptr. All backend memory.
  // REQUIRES: SupportsExperts(), ExpertRoutingProblem(routing) empty.
  virtual void RouteExperts(const ExpertRouting& routing, const float* logits, int64_t rows,
                            const float* correction_bias, int32_t* ids, float* weights) = 0;

  // The experts' outputs, weighted and summed per token, as partial sums of `num_chunks` equal
  // chunks of each expert's (local) inner width, the way MatMulChunked cuts a row-parallel
  // layer: out[c, r, :] = sum over j < top_k (in j order) of
  //   weights[r, j] * (down_e[:, chunk c] * (act(gate_e x[r]) * up_e x[r])[chunk c]),
  //   e = ids[r, j],
  // or, with `weights_on_input` (Llama 4: ExpertRouting::weight_on_input), of the expert run
  // on the weighted row, unweighted after:
  //   down_e[:, chunk c] * (act(gate_e y) * up_e y)[chunk c],  y = weights[r, j] * x[r],
  // then + the shared expert's chunk c of x[r] where `shared` is not null (GLM-4.5,
  // DeepSeek-V3, Llama 4), in f32 (out f32 [num_chunks, rows, hidden]). x [rows, hidden] is activation_dtype();
  // experts[e] is expert e's share for every e < experts.size(). Row r's floats depend only on
  // x[r], ids[r] and weights[r] (batch invariance), and chunk c's are the same whatever the
  // number of chunks around it (as MatMulChunked's).
  // REQUIRES: SupportsExperts(); ids in [0, experts.size()); every expert's local width a
  // multiple of num_chunks, its chunks whole blocks of the down matrix's format.
  virtual void MoeExperts(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                          const ExpertMlp* shared, Activation act, const int32_t* ids,
                          const float* weights, bool weights_on_input, int64_t top_k,
                          int64_t num_chunks, const MoeWorkspace& scratch, float* out) = 0;

  // Expert parallelism cuts MoeExperts in two, with an all-to-all between (the model's): each
  // rank runs its own experts' slots, and each token's slots are weighted and summed on the
  // rank that combines that token.
  //
  // The experts' half: for every slot s < rows * top_k whose expert ids[s] is one of
  // `experts` (ids [first_expert, first_expert + experts.size())), that expert's output for
  // x[s / top_k] (weights_on_input: weights[s] * x[s / top_k]), its output unweighted, cut
  // into num_chunks chunks as MoeExperts cuts it, at slots[slot_pos[s]] (f32 [num_chunks,
  // hidden] each: slots is [positions, num_chunks, hidden]). Other slots are skipped and their
  // slot_pos not read. slot_pos int32 [rows * top_k]; weights f32 [rows * top_k], read only
  // with weights_on_input (may be null otherwise).
  // REQUIRES: SupportsExperts(); slot_pos[s] >= 0 and distinct for the local slots.
  virtual void MoeExpertSlots(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                              int64_t first_expert, Activation act, const int32_t* ids,
                              const float* weights, bool weights_on_input, int64_t top_k,
                              int64_t num_chunks, const int32_t* slot_pos,
                              const MoeWorkspace& scratch, float* slots) = 0;

  // The tokens' half: out[c, r] (f32 [num_chunks, rows, hidden]) as MoeExperts computes it
  // for these rows, with slot (r, j)'s chunk c read from slots[slot_pos[r * top_k + j], c]
  // (as MoeExpertSlots writes them) instead of computed, and the shared expert (when not
  // null, held whole) run here on x [rows, hidden]. With every slot's output from
  // MoeExpertSlots (given the same weights_on_input), the result is MoeExperts' bit for bit.
  // REQUIRES: SupportsExperts().
  virtual void MoeCombine(const void* x, int64_t rows, const float* slots,
                          const int32_t* slot_pos, const float* weights, bool weights_on_input,
                          int64_t top_k, int64_t num_chunks, int64_t hidden,
                          const ExpertMlp* shared, Activation act, const MoeWorkspace& scratch,
                          float* out) = 0;

  // out[i] = a[i] + b[i] for i < count; out may alias a or b.
  virtual void Add(const void* a, const void* b, int64_t count, void* out) = 0;

  // x[i] *= factor for i < count (Gemma's embedding multiplier).
  virtual void Scale(void* x, int64_t count, float factor) = 0;

  // x[i] = cap * tanh(x[i] / cap) for i < count, x f32 (Gemma 2's final logit soft-cap).
  // REQUIRES: cap > 0.
  virtual void SoftCapF32(float* x, int64_t count, float cap) = 0;

  // out[t, :] = dequantized row (id_t - first_row) of `table` for the step's token ids, or
  // zeros when the id falls outside [first_row, first_row + table.rows) (a vocab-parallel
  // shard). out is [T, table.cols].
  virtual void EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* out) = 0;

  // out[i, :] = x[logit_rows[i], :] for the step's logit rows; rows of `row_elems` elements.
  virtual void GatherLogitRows(const void* x, int64_t row_elems, void* out) = 0;

  // Stores k_new/v_new [T, num_kv_heads, head_dim] at the step's positions in the pool, through
  // each sequence's block table (converting to pool.dtype).
  virtual void WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) = 0;

  // What PagedAttention will be asked at most, so that a backend allocates its attention
  // workspace once, at load, sized as the memory plan counts it (a GPU backend:
  // kernels/cuda/attention_workspace.h). Returns the bytes of backend memory it allocated.
  // RESOURCE_EXHAUSTED when they are not there; INVALID_ARGUMENT for a non-positive limit.
  // Without it a backend sizes its workspace from the steps it sees (tests, benchmarks).
  struct AttentionReservation {
    int64_t num_heads = 0;  // query heads of PagedAttention calls
    int64_t num_kv_heads = 0;
    int64_t head_dim = 0;
    DType kv_dtype = DType::kF16;
    int64_t block_size_tokens = 0;
    int64_t max_tokens_per_step = 0;  // rows of one step
    int64_t max_sequences = 0;    // sequences of one step (padding ones included)
    int64_t max_context = 0;      // keys one row attends to
  };
  virtual absl::StatusOr<int64_t> ReserveAttention(const AttentionReservation& limits) {
    (void)limits;
    return 0;
  }

  // What one layer's attention computes besides the keys it reads (model/config.h's LayerSpec).
  struct AttentionParams {
    float scale = 1.0f;         // scores = scale * q.k (1/sqrt(head_dim) unless the model says)
    int64_t sliding_window = 0;  // > 0: a query at p attends positions p - window + 1 .. p
    float logit_softcap = 0.0f;  // > 0: scores = cap * tanh(scores / cap) before the softmax
    // > 0: chunked local attention (Llama 4): a query at p attends positions
    // floor(p / chunk) * chunk .. p.
    int64_t attention_chunk = 0;
    // > 0: attention temperature tuning (Llama 4's NoPE layers): the scores of a query at p
    // are multiplied by log(floor((p + 1) / temperature_floor) + 1) * temperature_scale + 1
    // (transformers scales q by it; the same product).
    int64_t temperature_floor = 0;
    float temperature_scale = 0.0f;
    // Multi-head latent attention's absorbed form beside a fresh prefill's expanded one: the
    // sequences that start at position 0 are skipped (zeros as their rows' output), since
    // PrefillAttention serves them; each sequence's form, and so its floats, depends on it
    // alone, never on the batch around it.
    bool skip_fresh_sequences = false;
  };
  // "chunks of 8192 tokens, temperature tuning (floor 8192, scale 0.1)": the features of
  // `params` beyond a scale, a window and a soft-cap, for messages ("" when none).
  static std::string AttentionExtrasString(const AttentionParams& params);
  // Whether PagedAttention computes `params` (chunks and temperature tuning are not in every
  // backend); a model is refused at load, naming the feature, where it does not.
  virtual bool SupportsAttention(const AttentionParams& params) const = 0;

  // Causal grouped-query attention of the step's sequences over the paged pool.
  // q, out: [T, num_heads, head_dim]; query head h reads KV head h / (num_heads/num_kv_heads).
  // A query at position p attends to positions max(0, p - window + 1, chunk start)..p of its
  // own sequence (already in the pool; every position when neither window nor chunk is set);
  // softmax of the (temperature-scaled, soft-capped) scores in f32 with max subtraction.
  // REQUIRES: num_heads % pool.num_kv_heads == 0, params.scale > 0, window, cap, chunk and
  // temperature >= 0; SupportsAttention(params).
  virtual void PagedAttention(const void* q, int64_t num_heads, const AttentionParams& params,
                              const KvPoolView& pool, void* out) = 0;

  // ---- Multi-head latent attention (model/config.h's MlaSpec; a model with it is refused at
  // load on a backend where SupportsLatentAttention() is false) ----
  // The absorbed form (decode, and any step over cached positions) needs nothing new: the pool
  // holds one latent entry per token ([c, k_rope], num_kv_heads 1), read as keys and, through
  // the same memory (KvPoolView::v == k), as values, and PagedAttention runs over it with
  // queries [W_UK^T q_nope, q_rope]. These two serve the rest.
  virtual bool SupportsLatentAttention() const { return false; }

  // Rotates, in place, the `rope_dim` values at `offset` of each head of x [T, num_heads,
  // head_stride], as Rope rotates a whole head: RoPE on the last part of an MLA query head.
  // REQUIRES: SupportsLatentAttention(); rope_dim even, offset + rope_dim <= head_stride.
  virtual void RopePart(void* x, int64_t num_heads, int64_t head_stride, int64_t offset,
                        int64_t rope_dim, const float* inv_freq, RopeLayout layout);

  // The expanded form of a fresh prefill: for each sequence of the step that starts at
  // position 0 (not padding), causal attention of its rows over its own rows, keys and values
  // given per row with widths of their own (MLA's k = [k_nope, k_rope], v = W_UV c): q and k
  // [T, num_heads, key_dim], v and out [T, num_heads, value_dim]; scores scale * q.k, softmax
  // in f32 with max subtraction. The other sequences' rows of out are left as they are.
  // REQUIRES: SupportsPrefillAttention().
  virtual bool SupportsPrefillAttention() const { return false; }
  virtual void PrefillAttention(const void* q, const void* k, const void* v, int64_t num_heads,
                                int64_t key_dim, int64_t value_dim, float scale, void* out);

  // Waits for queued work; reports asynchronous failures (naming the call that failed). The
  // CPU backend runs ops to completion inside each call, so it always returns OK.
  // A GPU backend's host waits (this, CopyToHost, CopyToDevice, BeginStep, scratch growth)
  // have a deadline (kernels/cuda/device_wait.h) and end with DEADLINE_EXCEEDED or, after
  // RequestAbort, UNAVAILABLE.
  virtual absl::Status Synchronize() = 0;

  // Ends the host wait on the device in progress, and makes every later one end at once with
  // UNAVAILABLE instead of waiting: for a rank being torn down, or whose communicator failed
  // with work still queued behind a collective. The backend is unusable afterwards. The one
  // member that may be called from any thread, during another call. The CPU backend never
  // waits on anything, so its RequestAbort does nothing.
  virtual void RequestAbort() {}

  // After RequestAbort, once what blocked the device is gone (the aborted communicators'
  // kernels, ended by destroying them): waits for the queued work to drain (the usual
  // deadline), drops every step recording (they may hold the old communicators) and makes the
  // backend usable again, for a rank whose group is re-formed around a replaced peer. The
  // device's error when it reports one (a fault: the rank cannot go on). The CPU backend,
  // which never waits: OK.
  virtual absl::Status RecoverFromAbort() { return absl::OkStatus(); }

  // Bytes of weights decoded whole to multiply them since the last call: the fallback a
  // backend takes where its GEMM library refuses a weight's format (the CUDA backend's
  // decode-to-bf16 path, said once per role at load). 0 for a backend that never does.
  virtual int64_t TakeDecodedWeightBytes() { return 0; }

  // ---- Sampling where the logits are ----

  // Whether a rank should sample through SampleRows, leaving the logits where the step made
  // them, rather than copying them to the host for SampleStep (a GPU backend: they stay on the
  // device, and only token ids and logprobs come back).
  virtual bool PrefersSampleRows() const { return false; }

  // Samples `rows` (kernels/sampling_rows.h) of the f32 logits at `logits` (this backend's
  // memory, laid out as kernels/cuda/row_sampling.h's RowView: `layout_rows` rows cut into
  // slices of `per_rank` ids, per_rank = vocab for rows stored whole), changing them in place;
  // writes one RowSample per row to `out`. Waits for the results. The default runs the device
  // algorithm on the host (SampleRowsOnHost's passes) for a host-memory backend, and is
  // UNIMPLEMENTED elsewhere; INVALID_ARGUMENT when `out` is not one entry per row or the
  // layout cannot hold the rows.
  virtual absl::Status SampleRows(float* logits, int64_t vocab, int64_t per_rank,
                                  int64_t layout_rows, const SamplingRows& rows,
                                  absl::Span<RowSample> out);

  // ---- Step capture (optional: CUDA graphs for decode) ----

  // Whether RunCaptured records and replays (false: it just calls `body`).
  virtual bool SupportsStepCapture() const { return false; }

  // Runs `body`, which queues the current step's ops, possibly from a recording. A backend that
  // captures runs body as usual the first time for (`owner`, `key`), records it the next time,
  // and from then on replays the recording instead of calling body; the replay reads the
  // metadata of the current BeginStep. So for one (owner, key), body must queue the same ops on
  // the same buffers with the same sizes, every step must have the same numbers of token ids,
  // positions, sequences and logit rows, with one query token per sequence (pad with `padding`
  // sequences), and body must not call CopyToHost, Synchronize, Allocate, Free or BeginStep.
  // A body with collectives (tp > 1) is recorded with them only where they are enqueued on
  // this backend's stream (Communicator::capturable(): NCCL), and runs inside
  // Communicator::RunRecorded, which watches a replay as one collective; the step's wait for
  // its collectives comes after. Every rank runs the same keys in the same order (whether it
  // records, replays or runs eagerly, the collectives inside meet their peers' in order).
  // Errors of body (a communicator's, say) are returned; a failed recording falls back to
  // running body.
  virtual absl::Status RunCaptured(const void* owner, int64_t key,
                                   absl::FunctionRef<absl::Status()> body) {
    (void)owner;
    (void)key;
    return body();
  }
  // Drops the recordings of `owner`: call it before any buffer they use changes or is freed
  // (recordings hold addresses), e.g. from the owner's destructor.
  virtual void ForgetCaptured(const void* owner) { (void)owner; }
};

// Backend::SampleRows' argument checks: INVALID_ARGUMENT naming the value and the bound when
// `out_rows` is not one per row, the layout has fewer rows than asked for or slices that do
// not cover the vocabulary, or a row's bias, penalty or mask range falls outside its array.
absl::Status CheckSampleRows(int64_t vocab, int64_t per_rank, int64_t layout_rows,
                             const SamplingRows& rows, size_t out_rows);

// Bytes of one activation element of `backend`.
int64_t ActivationBytes(const Backend& backend);

// Allocates `bytes` and fills it from host memory `src`.
absl::StatusOr<DeviceBuffer> Upload(Backend& backend, const void* src, int64_t bytes,
                                    std::string_view what);

// Backend::PlaceWeight's default: `host` in its stored form. On a host_memory() backend the
// parts `host` does not own (views) are used in place and counted in bytes_viewed; every other
// part is uploaded into a buffer of its own (WeightMatrixPartBytes) and counted in bytes_copied.
absl::StatusOr<PlacedWeight> PlaceStoredWeight(Backend& backend, const HostMatrix& host,
                                               std::string_view what);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_BACKEND_H_
