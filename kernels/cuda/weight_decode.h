// The element math the CUDA kernels share with the host: bf16 / f16 / e4m3 conversions and the
// decode of one weight element (WeightAt, the device twin of DequantizeWeightRow in
// kernels/weight_matrix.cc). Every function is TP_HD: __host__ __device__ under nvcc, a plain
// inline function under g++, so the same source runs in the kernels and in host tests
// (tests/kernels/weight_decode_test.cc compares WeightAt with the CPU reference bit for bit).
//
//   const float v = WeightAt(ToDeviceWeight(matrix), r, c);   // host or device
//
// On the device each conversion is the CUDA intrinsic (one instruction on sm_90); on the host
// it is bit arithmetic that gives the intrinsic's result bit for bit, NaNs included (checked
// against the CUDA headers' own host emulation by conversion_twin_test.cc):
//   F16BitsToF32    exact; any NaN -> 0x7FFFFFFF (cvt.f32.f16 gives the canonical NaN)
//   Bf16BitsToF32   exact (the top half of an f32), NaN payload kept
//   F32ToBf16Bits   round to nearest even (overflow -> inf); any NaN -> 0x7FFF
//   Fp8ToF32        exact (e4m3 fn: S.1111.111 is NaN) ; NaN -> 0x7FFFFFFF (via f16 0x7FFF)
//   F32ToFp8        round to nearest even, saturating at +-448 (inf too); any NaN -> 0x7F
// These agree with formats/dtype.cc and kernels/quantize.cc (the CPU's) on every non-NaN
// value; for NaN both give a NaN, with different payload and sign bits.
//
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_WEIGHT_DECODE_H_
#define TPSERVE_KERNELS_CUDA_WEIGHT_DECODE_H_

#include <cstdint>
#include <cstring>

#include "kernels/cuda/device_types.h"

#include "kernels/cuda/host_device.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace tpserve::cuda {

TP_HD uint32_t F32Bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
#endif
}

TP_HD float BitsF32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float v;
  std::memcpy(&v, &u, 4);
  return v;
#endif
}

// Element i of a T array at `base` (host: memcpy, so any byte buffer may hold it).
template <typename T>
TP_HD T LoadAt(const void* base, int64_t i) {
#if defined(__CUDA_ARCH__)
  return static_cast<const T*>(base)[i];
#else
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + i * static_cast<int64_t>(sizeof(T)),
              sizeof(T));
  return v;
#endif
}

TP_HD float F16BitsToF32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  __half_raw raw;
  raw.x = h;
  return __half2float(__half(raw));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return BitsF32(mantissa != 0 ? 0x7FFFFFFFu : (sign | 0x7F800000u));
  if (exponent != 0) return BitsF32(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsF32(sign);
  uint32_t f32_exponent = 113;  // subnormal half: mantissa * 2^-24, a normal f32
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --f32_exponent;
  }
  return BitsF32(sign | (f32_exponent << 23) | ((mantissa & 0x3FFu) << 13));
#endif
}

TP_HD float Bf16BitsToF32(uint16_t b) { return BitsF32(static_cast<uint32_t>(b) << 16); }

TP_HD uint16_t F32ToBf16Bits(float v) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#else
  const uint32_t bits = F32Bits(v);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  // Round to nearest even on the 16 dropped bits; a carry moves into the exponent (and past
  // the largest finite value, to infinity), as the hardware rounds.
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
#endif
}

// Exact: every e4m3 value is an f16 value (the device converts through f16).
TP_HD float Fp8ToF32(uint8_t code) {
#if defined(__CUDA_ARCH__)
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exponent = (code >> 3) & 0x0Fu;
  uint32_t mantissa = code & 0x07u;
  if (exponent == 0x0F && mantissa == 0x07) return BitsF32(0x7FFFFFFFu);
  if (exponent != 0) return BitsF32(sign | ((exponent + 120) << 23) | (mantissa << 20));
  if (mantissa == 0) return BitsF32(sign);
  uint32_t f32_exponent = 121;  // subnormal: mantissa * 2^-9
  while ((mantissa & 0x08u) == 0) {
    mantissa <<= 1;
    --f32_exponent;
  }
  return BitsF32(sign | (f32_exponent << 23) | ((mantissa & 0x07u) << 20));
#endif
}

// Round to nearest even, saturating at +-448 (infinity too); NaN -> 0x7F.
TP_HD uint8_t F32ToFp8(float v) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
#else
  const uint32_t bits = F32Bits(v);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return 0x7F;
  // From 448 (the largest finite e4m3) up, every value rounds to 448 or to 480, which e4m3fn
  // does not have (its code is NaN): satfinite gives 448 (0x7E) for all of them.
  if (magnitude >= 0x43E00000u) return sign | 0x7E;
  if (magnitude < 0x3C800000u) {  // below 2^-6: subnormal codes in steps of 2^-9
    const float steps = BitsF32(magnitude) * 512.0f;  // exact: a power-of-two scaling
    int code = static_cast<int>(steps);
    const float frac = steps - static_cast<float>(code);
    if (frac > 0.5f || (frac == 0.5f && (code & 1) == 1)) ++code;  // code 8 is 2^-6 (normal)
    return sign | static_cast<uint8_t>(code);
  }
  // Normal: keep 3 of 23 mantissa bits, round to nearest even (a carry moves into the
  // exponent), rebias the exponent from 127 to 7.
  const uint32_t rounded = magnitude + 0x7FFFFu + ((magnitude >> 20) & 1u);
  return sign | static_cast<uint8_t>((rounded >> 20) - ((127 - 7) << 3));
#endif
}

// The scale of one group of activations quantized to e4m3 (a row, or 128 columns of a row):
// s = a / 448 with a = max |x| over the group clamped to `scale_ub` when scale_ub > 0, and 1
// when a == 0, so that x / s fits e4m3's range and x ~= e4m3(x / s) * s.
TP_HD float Fp8ActivationScale(float amax, float scale_ub) {
  if (scale_ub > 0.0f && amax > scale_ub) amax = scale_ub;
  return amax > 0.0f ? amax / 448.0f : 1.0f;
}

// Element (r, c) of `w` as f32, in stored column order (an act-order permutation is not
// applied), with the f32 operations of DequantizeWeightRow in the same order:
//   f32 / f16 / bf16 / fp8    the value
//   fp8 per channel           code * s[r]            (scales nullptr: code)
//   fp8 128x128 tiles         code * s[r / 128][c / 128]
//   int4 groups               (code - zero[r][g]) * scale[r][g], g = c / group_size, codes in
//                             GGML Q4_0 nibble order per 32 columns (byte j: column j low
//                             nibble, column j + 16 high nibble)
TP_HD float WeightAt(const DeviceWeight& w, int64_t r, int64_t c) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.row_bytes;
  switch (w.kind) {
    case WeightKind::kF32: return LoadAt<float>(row, c);
    case WeightKind::kF16: return F16BitsToF32(LoadAt<uint16_t>(row, c));
    case WeightKind::kBF16: return Bf16BitsToF32(LoadAt<uint16_t>(row, c));
    case WeightKind::kFp8: return Fp8ToF32(row[c]);
    case WeightKind::kFp8PerChannel: {
      const float v = Fp8ToF32(row[c]);
      return w.scales == nullptr ? v : v * LoadAt<float>(w.scales, r);
    }
    case WeightKind::kFp8Block128: {
      const float s = LoadAt<float>(w.scales, (r / 128) * w.scale_stride + c / 128);
      return Fp8ToF32(row[c]) * s;
    }
    case WeightKind::kInt4Group: {
      const int64_t in_chunk = c % 32;
      const uint8_t byte = row[(c / 32) * 16 + (in_chunk % 16)];
      const int code = in_chunk < 16 ? (byte & 0x0F) : (byte >> 4);
      const int64_t g = r * w.scale_stride + c / w.group_size;
      const float zero = F16BitsToF32(LoadAt<uint16_t>(w.zeros, g));
      const float scale = F16BitsToF32(LoadAt<uint16_t>(w.scales, g));
      return (static_cast<float>(code) - zero) * scale;
    }
  }
  return 0.0f;
}

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_WEIGHT_DECODE_H_
