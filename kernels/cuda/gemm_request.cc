#include "kernels/cuda/gemm_request.h"

#include "base/str_cat.h"

namespace tpserve::cuda {

int PointerAlignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

GemmRequest MakeGemmRequest(const GemmArgs& args, bool deterministic) {
  GemmRequest r;
  r.type = args.type;
  r.out = args.out;
  r.w_scale = args.w_scale;
  r.x_scale = args.x_scale;
  r.bias = args.bias != nullptr;
  if (deterministic) {
    // Nothing of the call's own problem enters the request: the algorithm is a function of
    // the types and scale modes alone.
    r.query_m = kPinnedQueryM;
    r.query_n = kPinnedQueryN;
    r.query_k = kPinnedQueryK;
    r.query_ldw = kPinnedQueryK;
    r.query_ldx = kPinnedQueryK;
    r.query_ldy = kPinnedQueryN;
    r.align_w = r.align_x = r.align_y = 16;
    r.reductions_allowed = false;
    r.pinned = true;
    return r;
  }
  r.query_m = args.m;
  r.query_n = args.n;
  r.query_k = args.k;
  r.query_ldw = args.ldw;
  r.query_ldx = args.ldx;
  r.query_ldy = args.ldy;
  r.align_w = PointerAlignment(args.w);
  r.align_x = PointerAlignment(args.x);
  r.align_y = PointerAlignment(args.y);
  r.reductions_allowed = true;
  r.pinned = false;
  return r;
}

GemmArgs MatMulGemmArgs(GemmType type, int64_t m, int64_t n, int64_t k, int64_t ldw, bool y_f32) {
  GemmArgs g;
  g.type = type;
  g.out = type == GemmType::kBF16 && !y_f32 ? GemmType::kBF16 : GemmType::kF32;
  g.m = m;
  g.n = n;
  g.k = k;
  g.ldw = ldw;
  g.ldx = k;
  g.ldy = n;
  return g;
}

GemmArgs Fp8ScaledGemmArgs(bool block128, int64_t m, int64_t n, int64_t k, int64_t ldw,
                           bool y_f32) {
  GemmArgs g;
  g.type = GemmType::kE4M3;
  g.out = y_f32 ? GemmType::kF32 : GemmType::kBF16;
  g.m = m;
  g.n = n;
  g.k = k;
  g.ldw = ldw;
  g.ldx = k;
  g.ldy = n;
  g.w_scale = block128 ? GemmScale::kBlock128 : GemmScale::kOuterVec;
  g.x_scale = block128 ? GemmScale::kVec128 : GemmScale::kOuterVec;
  return g;
}

Block128ScaleLayout CublasBlock128Layout(int64_t n, int64_t k) {
  constexpr int64_t kTile = 128;
  Block128ScaleLayout l;
  l.n_tiles = (n + kTile - 1) / kTile;
  l.k_tiles = (k + kTile - 1) / kTile;
  l.ld = (l.k_tiles + 3) / 4 * 4;
  return l;
}

ScaleRepack Block128ScaleRepack(const Block128ScaleLayout& layout, int64_t stored_stride) {
  ScaleRepack c;
  c.dst_pitch_bytes = layout.ld * 4;
  c.src_pitch_bytes = stored_stride * 4;
  c.width_bytes = layout.k_tiles * 4;
  c.height = layout.n_tiles;
  return c;
}

const char* GemmTypeName(GemmType type) {
  switch (type) {
    case GemmType::kF32: return "f32";
    case GemmType::kF16: return "f16";
    case GemmType::kBF16: return "bf16";
    case GemmType::kE4M3: return "e4m3";
  }
  return "?";
}

const char* GemmScaleName(GemmScale scale) {
  switch (scale) {
    case GemmScale::kNone: return "none";
    case GemmScale::kOuterVec: return "outer-vector";
    case GemmScale::kVec128: return "1x128";
    case GemmScale::kBlock128: return "128x128";
  }
  return "?";
}

std::string GemmRequestString(const GemmRequest& r) {
  return StrCat(GemmTypeName(r.type), " x ", GemmTypeName(r.type), " -> ", GemmTypeName(r.out),
                " scales ", GemmScaleName(r.w_scale), "/", GemmScaleName(r.x_scale),
                r.bias ? " +bias" : "", " query m=", r.query_m, " n=", r.query_n,
                " k=", r.query_k, " ld ", r.query_ldw, "/", r.query_ldx, "/", r.query_ldy,
                " align ", r.align_w, "/", r.align_x, "/", r.align_y,
                r.reductions_allowed ? " any-reduction" : " no-split-K",
                r.pinned ? " pinned" : " per-shape");
}

}  // namespace tpserve::cuda
