"""Quantizers and their exact inverses, as pure numpy functions (no file formats here).

FP8 (E4M3, "fn": no infinities, max 448, NaN = 0x7F/0xFF):
    codes, scale = quantize_fp8_per_channel(w)          # scale f32 [out, 1]
    codes, scale = quantize_fp8_block(w, (128, 128))    # scale f32 [ceil(out/128), ceil(in/128)]
    w_hat = dequantize_fp8_per_channel(codes, scale)    # float32(e4m3(code)) * scale, in f32
  codes are uint8 bit patterns. The cast saturates: values are clipped to +-448 before
  rounding to nearest even (as fbgemm and compressed-tensors do; a plain ml_dtypes cast turns
  anything at or above 480 into NaN). NaN stays NaN. A scale is max|tile| / 448, rounded to the
  scale dtype first so the codes are computed against the scale that is stored; an all-zero
  row or tile gets scale 1.

INT4, group-wise round-to-nearest along the input axis (GPTQ's min/max rule):
    q, scales, zeros = quantize_int4_groupwise(w, group_size=32, sym=False)
      q uint8 [out, in] in 0..15; scales float16 [out, in/g]; zeros int32 [out, in/g]
      asym: range [min(w, 0), max(w, 0)], scale = range / 15, zero = round(-lo / scale)
      sym:  scale = 2 max|w| / 15, zero = 8
    q, scales, zeros, g_idx, perm = quantize_int4_desc_act(w, 32, sym=False)
      groups are formed over the columns in `perm` order (descending column L2 norm); q stays
      in the original column order and g_idx[j] is the group of original input channel j.
    w_hat = dequantize_int4(q, scales, zeros, g_idx)   # float32(q - z) * float32(scale)
  The codes are computed against the float16-rounded scale, which is what is stored.
"""
import ml_dtypes
import numpy as np

E4M3_MAX = 448.0
FP8_E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
INT4_MAX = 15


def _require_finite_matrix(w):
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2:
        raise ValueError(f"expected a 2-D weight [out, in], got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weight has NaN or infinite values")
    return w


def fp8_e4m3_codes(x):
    """Saturating cast to E4M3: clip to +-448, round to nearest even. Returns uint8 codes."""
    x = np.asarray(x, dtype=np.float32)
    return np.clip(x, -E4M3_MAX, E4M3_MAX).astype(FP8_E4M3).view(np.uint8)


def fp8_e4m3_values(codes):
    """uint8 E4M3 codes -> float32 (exact)."""
    return np.asarray(codes, dtype=np.uint8).view(FP8_E4M3).astype(np.float32)


def _scale_from_amax(amax, scale_dtype):
    scale = np.where(amax > 0, amax / np.float32(E4M3_MAX), np.float32(1.0)).astype(np.float32)
    stored = scale.astype(scale_dtype)
    if np.any(stored.astype(np.float32) == 0):
        raise ValueError(f"a scale underflows {np.dtype(scale_dtype).name}")
    return stored


def quantize_fp8_per_channel(w, scale_dtype=np.float32):
    """w f32 [out, in] -> (codes uint8 [out, in], scale [out, 1] of scale_dtype)."""
    w = _require_finite_matrix(w)
    scale = _scale_from_amax(np.max(np.abs(w), axis=1, keepdims=True), scale_dtype)
    return fp8_e4m3_codes(w / scale.astype(np.float32)), scale


def dequantize_fp8_per_channel(codes, scale):
    return fp8_e4m3_values(codes) * np.asarray(scale).astype(np.float32).reshape(-1, 1)


def _expand_blocks(scale, block, shape):
    rows, cols = block
    full = np.repeat(np.repeat(scale.astype(np.float32), rows, axis=0), cols, axis=1)
    return full[:shape[0], :shape[1]]


def quantize_fp8_block(w, block=(128, 128), scale_dtype=np.float32):
    """w f32 [out, in] -> (codes uint8 [out, in], scale [ceil(out/br), ceil(in/bc)]).

    Edge tiles may be partial; their scale covers only the elements that exist.
    """
    w = _require_finite_matrix(w)
    rows, cols = block
    out, inn = w.shape
    num_r, num_c = -(-out // rows), -(-inn // cols)
    padded = np.zeros((num_r * rows, num_c * cols), np.float32)
    padded[:out, :inn] = np.abs(w)
    amax = padded.reshape(num_r, rows, num_c, cols).max(axis=(1, 3))
    scale = _scale_from_amax(amax, scale_dtype)
    return fp8_e4m3_codes(w / _expand_blocks(scale, block, w.shape)), scale


def dequantize_fp8_block(codes, scale, block=(128, 128)):
    codes = np.asarray(codes, dtype=np.uint8)
    return fp8_e4m3_values(codes) * _expand_blocks(np.asarray(scale), block, codes.shape)


def quantize_int4_groupwise(w, group_size, sym, min_zero=0):
    """Group-wise RTN. min_zero=1 keeps every zero point >= 1 (GPTQ v1 stores zero - 1)."""
    w = _require_finite_matrix(w)
    out, inn = w.shape
    if group_size <= 0 or inn % group_size:
        raise ValueError(f"group_size {group_size} must divide in_features {inn}")
    groups = w.reshape(out, inn // group_size, group_size)
    if sym:
        amax = np.max(np.abs(groups), axis=2)
        lo, hi = -amax, amax
    else:
        lo = np.minimum(groups.min(axis=2), 0)
        hi = np.maximum(groups.max(axis=2), 0)
    empty = (lo == 0) & (hi == 0)
    lo, hi = np.where(empty, -1.0, lo), np.where(empty, 1.0, hi)
    scales = ((hi - lo) / INT4_MAX).astype(np.float32).astype(np.float16)
    s = scales.astype(np.float32)
    if np.any(s == 0):
        raise ValueError("a group scale underflows float16")
    if sym:
        zeros = np.full(scales.shape, (INT4_MAX + 1) // 2, np.int32)
    else:
        zeros = np.clip(np.round(-lo / s), min_zero, INT4_MAX).astype(np.int32)
    q = np.clip(np.round(groups / s[..., None]) + zeros[..., None], 0, INT4_MAX)
    return q.reshape(out, inn).astype(np.uint8), scales, zeros


def sequential_g_idx(in_features, group_size):
    return (np.arange(in_features) // group_size).astype(np.int32)


def desc_act_permutation(w):
    """Input channels by descending column L2 norm (ties keep index order)."""
    norms = np.linalg.norm(np.asarray(w, dtype=np.float64), axis=0)
    return np.argsort(-norms, kind="stable")


def quantize_int4_desc_act(w, group_size, sym, min_zero=0, perm=None):
    w = _require_finite_matrix(w)
    perm = desc_act_permutation(w) if perm is None else np.asarray(perm)
    q_perm, scales, zeros = quantize_int4_groupwise(w[:, perm], group_size, sym, min_zero)
    q = np.empty_like(q_perm)
    q[:, perm] = q_perm
    g_idx = np.empty(w.shape[1], np.int32)
    g_idx[perm] = sequential_g_idx(w.shape[1], group_size)
    return q, scales, zeros, g_idx, perm


def dequantize_int4(q, scales, zeros, g_idx):
    """q [out, in], scales/zeros [out, groups], g_idx [in] -> f32 [out, in]."""
    g_idx = np.asarray(g_idx, dtype=np.int64)
    centered = np.asarray(q, np.int32) - np.asarray(zeros, np.int32)[:, g_idx]
    return centered.astype(np.float32) * np.asarray(scales).astype(np.float32)[:, g_idx]
