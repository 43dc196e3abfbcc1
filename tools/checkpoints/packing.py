"""INT4 packers for the AutoAWQ GEMM and GPTQ v1 checkpoint layouts, and their unpackers.

Inputs are the format-free tensors of quant.py: q uint8 [out, in] (0..15), scales float16
[out, groups], zeros int [out, groups], g_idx int32 [in]. Nibble i of an int32 is bits
4i..4i+3 (i = 0 is the least significant nibble); int32s are stored little-endian.

AutoAWQ GEMM (quant_method "awq", version "gemm"), from WQLinear_GEMM.from_linear:
    qweight int32 [in, out/8]       packed along the OUTPUT axis, interleaved: nibble i of
                                    qweight[k, c] holds q[8c + AWQ_ORDER[i], k]
    qzeros  int32 [in/g, out/8]     same interleave; the zero point itself (no offset)
    scales  float16 [in/g, out]
  e.g. outputs 0..7 holding codes 0..7 pack to 0x75316420.

GPTQ v1 (quant_method "gptq", checkpoint_format "gptq"), from AutoGPTQ QuantLinear.pack:
    qweight int32 [in/8, out]       packed along the INPUT axis, in order: nibble i of
                                    qweight[r, o] holds q[o, 8r + i]
    qzeros  int32 [in/g, out/8]     packed along the output axis, in order, storing zero - 1
                                    (readers add 1 back), so a zero point of 0 cannot be
                                    stored and is refused here
    scales  float16 [in/g, out]
    g_idx   int32 [in]              group of each input channel (i // g without desc_act)
  e.g. symmetric 4-bit (zero 8) gives qzeros words of 0x77777777.
"""
import numpy as np

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
IN_ORDER = tuple(range(8))
_SHIFTS = np.arange(0, 32, 4, dtype=np.uint32)


def _check_nibbles(values, what):
    values = np.asarray(values)
    if values.size and (values.min() < 0 or values.max() > 15):
        raise ValueError(f"{what} must be in 0..15, got {values.min()}..{values.max()}")
    return values.astype(np.uint32)


def pack_nibbles(values, order=IN_ORDER):
    """[..., n] ints in 0..15 -> [..., n/8] int32; nibble i takes element order[i] of 8."""
    values = _check_nibbles(values, "packed values")
    if values.shape[-1] % 8:
        raise ValueError(f"last axis {values.shape[-1]} is not a multiple of 8")
    eights = values.reshape(*values.shape[:-1], -1, 8)[..., list(order)]
    packed = np.bitwise_or.reduce(eights << _SHIFTS, axis=-1).astype(np.uint32)
    return packed.view(np.int32)


def unpack_nibbles(packed, order=IN_ORDER):
    """Inverse of pack_nibbles: [..., m] int32 -> [..., 8m] uint8."""
    packed = np.asarray(packed)
    if packed.dtype != np.int32:
        raise ValueError(f"packed words must be int32, got {packed.dtype}")
    nibbles = (packed.view(np.uint32)[..., None] >> _SHIFTS) & 0xF
    values = np.empty_like(nibbles)
    values[..., list(order)] = nibbles
    return values.reshape(*packed.shape[:-1], -1).astype(np.uint8)


def _check_int4_inputs(q, scales, zeros, group_size):
    q = np.asarray(q)
    out, inn = q.shape
    groups = inn // group_size
    if inn % group_size or out % 8:
        raise ValueError(f"shape [{out}, {inn}] needs in % {group_size} == 0 and out % 8 == 0")
    if scales.shape != (out, groups) or zeros.shape != (out, groups):
        raise ValueError(f"scales {scales.shape} / zeros {zeros.shape} != [{out}, {groups}]")


def pack_awq(q, scales, zeros, group_size):
    """-> {"qweight", "qzeros", "scales"} in AutoAWQ GEMM layout."""
    _check_int4_inputs(q, scales, zeros, group_size)
    return {
        "qweight": pack_nibbles(np.asarray(q).T, AWQ_ORDER),
        "qzeros": pack_nibbles(np.asarray(zeros).T, AWQ_ORDER),
        "scales": np.ascontiguousarray(np.asarray(scales, np.float16).T),
    }


def unpack_awq(qweight, qzeros, scales):
    """-> (q [out, in], scales float16 [out, groups], zeros int32 [out, groups])."""
    q = unpack_nibbles(qweight, AWQ_ORDER).T
    zeros = unpack_nibbles(qzeros, AWQ_ORDER).T.astype(np.int32)
    return np.ascontiguousarray(q), np.ascontiguousarray(scales.T), np.ascontiguousarray(zeros)


def pack_gptq(q, scales, zeros, g_idx, group_size):
    """-> {"qweight", "qzeros", "scales", "g_idx"} in GPTQ v1 layout."""
    _check_int4_inputs(q, scales, zeros, group_size)
    q, zeros = np.asarray(q), np.asarray(zeros)
    if q.shape[1] % 8:
        raise ValueError(f"in_features {q.shape[1]} is not a multiple of 8")
    if zeros.size and zeros.min() < 1:
        raise ValueError("GPTQ v1 stores zero - 1: a zero point of 0 cannot be stored")
    return {
        "qweight": np.ascontiguousarray(pack_nibbles(q, IN_ORDER).T),
        "qzeros": pack_nibbles(zeros.T - 1, IN_ORDER),
        "scales": np.ascontiguousarray(np.asarray(scales, np.float16).T),
        "g_idx": np.asarray(g_idx, np.int32),
    }


def unpack_gptq(qweight, qzeros, scales, g_idx):
    """-> (q [out, in], scales float16 [out, groups], zeros int32 [out, groups], g_idx)."""
    q = unpack_nibbles(np.ascontiguousarray(qweight.T), IN_ORDER)
    zeros = unpack_nibbles(qzeros, IN_ORDER).T.astype(np.int32) + 1
    return q, np.ascontiguousarray(scales.T), np.ascontiguousarray(zeros), np.asarray(g_idx)
