#include "checkpoint/testing/tiny_llama.h"

#include <cmath>
#include <random>
#include <string>

#include "kernels/check.h"
#include "checkpoint/stored_matrix.h"
#include "model/weight_formats.h"

namespace tpserve {
namespace {

using Vec = std::vector<double>;

std::vector<float> Normal(int64_t n, std::mt19937* rng, float mean, float stddev) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

// A checkpoint tensor dequantized to f64, row-major.
Vec Load(const WeightSource& src, TensorRole t, int64_t layer) {
  // A tiny Llama: a default description names its tensors.
  absl::StatusOr<TensorView> view =
      src.Find(ModuleName(ModelSpec{}, src.format(), t, layer) + ".weight");
  TP_CHECK(view.ok(), "reference: tensor missing");
  std::vector<float> f(view->num_elements());
  const int64_t row_bytes = RowBytes(view->dtype, view->cols()).value();
  for (int64_t r = 0; r < view->rows(); ++r) {
    DequantizeRow(view->dtype, view->data + r * row_bytes, f.data() + r * view->cols(),
                  view->cols());
  }
  return Vec(f.begin(), f.end());
}

// y[n] = W[n, k] x[k]
Vec MatVec(const Vec& w, const Vec& x) {
  const size_t k = x.size(), n = w.size() / k;
  Vec y(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < k; ++j) y[i] += w[i * k + j] * x[j];
  }
  return y;
}

Vec RmsNorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// Rotates every head of x (num_heads * head_dim) for position `pos`.
void Rope(Vec* x, int64_t head_dim, int64_t pos, double theta, bool interleaved) {
  const int64_t half = head_dim / 2;
  for (size_t base = 0; base < x->size(); base += head_dim) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = pos * std::pow(theta, -2.0 * i / head_dim);
      const size_t a = base + (interleaved ? 2 * i : i);
      const size_t b = base + (interleaved ? 2 * i + 1 : i + half);
      const double x0 = (*x)[a], x1 = (*x)[b];
      (*x)[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
      (*x)[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
    }
  }
}

// Causal attention of every position over keys[0..pos]; q/k/v are per position.
std::vector<Vec> Attention(const ModelSpec& c, const std::vector<Vec>& q,
                           const std::vector<Vec>& k, const std::vector<Vec>& v) {
  const int64_t hd = c.head_dim, group = c.num_heads / c.num_kv_heads;
  std::vector<Vec> out(q.size(), Vec(c.num_heads * hd, 0.0));
  for (size_t p = 0; p < q.size(); ++p) {
    for (int64_t h = 0; h < c.num_heads; ++h) {
      const int64_t g = h / group;
      Vec score(p + 1);
      double mx = -1e300;
      for (size_t t = 0; t <= p; ++t) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += q[p][h * hd + d] * k[t][g * hd + d];
        score[t] = dot / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, score[t]);
      }
      double sum = 0;
      for (double& s : score) sum += (s = std::exp(s - mx));
      for (size_t t = 0; t <= p; ++t) {
        for (int64_t d = 0; d < hd; ++d) out[p][h * hd + d] += score[t] / sum * v[t][g * hd + d];
      }
    }
  }
  return out;
}

}  // namespace

ModelSpec TinyLlamaSpec() {
  ModelSpec c;
  c.name = "tiny-llama";
  c.vocab_size = 99;
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.max_context_tokens = 256;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

std::unique_ptr<InMemoryWeightSource> MakeTinyLlama(const ModelSpec& c,
                                                    const TinyLlamaOptions& o) {
  TP_CHECK(c.tie_word_embeddings == !o.separate_lm_head, "tie flag and lm head disagree");
  auto src = std::make_unique<InMemoryWeightSource>(o.format);
  std::mt19937 rng(o.seed);
  auto name = [&](TensorRole t, int64_t l) { return ModuleName(c, o.format, t, l) + ".weight"; };
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t f = c.intermediate_size, v = c.vocab_size;
  // Scales keep activations O(1) through the layers: weights ~ N(0, 1/in_features).
  auto linear = [&](TensorRole t, int64_t l, int64_t rows, int64_t cols) {
    src->AddFloat(name(t, l), {rows, cols},
                  Normal(rows * cols, &rng, 0.0f, 1.0f / std::sqrt(float(cols))), o.linear);
  };
  src->AddFloat(name(TensorRole::kEmbedding, 0), {v, h}, Normal(v * h, &rng, 0.0f, 0.5f),
                o.embedding);
  if (o.separate_lm_head) {
    src->AddFloat(name(TensorRole::kLmHead, 0), {v, h}, Normal(v * h, &rng, 0.0f, 0.5f),
                  o.embedding);
  }
  src->AddFloat(name(TensorRole::kFinalNorm, 0), {h}, Normal(h, &rng, 1.0f, 0.1f), DType::kF32);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    src->AddFloat(name(TensorRole::kAttnNorm, l), {h}, Normal(h, &rng, 1.0f, 0.1f), DType::kF32);
    src->AddFloat(name(TensorRole::kFfnNorm, l), {h}, Normal(h, &rng, 1.0f, 0.1f), DType::kF32);
    linear(TensorRole::kQ, l, q, h);
    linear(TensorRole::kK, l, kv, h);
    linear(TensorRole::kV, l, kv, h);
    linear(TensorRole::kO, l, h, q);
    linear(TensorRole::kGate, l, f, h);
    linear(TensorRole::kUp, l, f, h);
    linear(TensorRole::kDown, l, h, f);
  }
  return src;
}

std::vector<float> ReferenceLogits(const ModelSpec& c, const WeightSource& src,
                                   absl::Span<const int32_t> tokens) {
  const bool interleaved = src.format() == CheckpointFormat::kGguf;
  const int64_t h = c.hidden_size, n = static_cast<int64_t>(tokens.size());
  const Vec emb = Load(src, TensorRole::kEmbedding, 0);
  std::vector<Vec> x(n);
  for (int64_t p = 0; p < n; ++p) {
    x[p] = Vec(emb.begin() + tokens[p] * h, emb.begin() + (tokens[p] + 1) * h);
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const Vec an = Load(src, TensorRole::kAttnNorm, l), fn = Load(src, TensorRole::kFfnNorm, l);
    const Vec wq = Load(src, TensorRole::kQ, l), wk = Load(src, TensorRole::kK, l);
    const Vec wv = Load(src, TensorRole::kV, l), wo = Load(src, TensorRole::kO, l);
    const Vec wg = Load(src, TensorRole::kGate, l), wu = Load(src, TensorRole::kUp, l);
    const Vec wd = Load(src, TensorRole::kDown, l);
    std::vector<Vec> q(n), k(n), v(n);
    for (int64_t p = 0; p < n; ++p) {
      const Vec hn = RmsNorm(x[p], an, c.rms_norm_eps);
      q[p] = MatVec(wq, hn);
      k[p] = MatVec(wk, hn);
      v[p] = MatVec(wv, hn);
      Rope(&q[p], c.head_dim, p, c.rope_theta, interleaved);
      Rope(&k[p], c.head_dim, p, c.rope_theta, interleaved);
    }
    const std::vector<Vec> attn = Attention(c, q, k, v);
    for (int64_t p = 0; p < n; ++p) {
      const Vec o = MatVec(wo, attn[p]);
      for (int64_t i = 0; i < h; ++i) x[p][i] += o[i];
      const Vec hn = RmsNorm(x[p], fn, c.rms_norm_eps);
      const Vec g = MatVec(wg, hn), u = MatVec(wu, hn);
      Vec a(g.size());
      for (size_t i = 0; i < a.size(); ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const Vec d = MatVec(wd, a);
      for (int64_t i = 0; i < h; ++i) x[p][i] += d[i];
    }
  }
  const Vec on = Load(src, TensorRole::kFinalNorm, 0);
  const Vec head = c.tie_word_embeddings ? emb : Load(src, TensorRole::kLmHead, 0);
  std::vector<float> logits(n * c.vocab_size);
  for (int64_t p = 0; p < n; ++p) {
    const Vec y = MatVec(head, RmsNorm(x[p], on, c.rms_norm_eps));
    for (int64_t i = 0; i < c.vocab_size; ++i) {
      logits[p * c.vocab_size + i] = static_cast<float>(y[i]);
    }
  }
  return logits;
}

}  // namespace tpserve
