// weight_decode.h's host conversions against the CUDA headers' own host code for the same
// intrinsics (cuda_fp16.h __half2float, cuda_bf16.h __float2bfloat16_rn, cuda_fp8.h
// __nv_cvt_fp8_to_halfraw / __nv_cvt_float_to_fp8 with __NV_SATFINITE, compiled here by g++,
// where they take their documented host paths): bit for bit, NaNs included. On the device the
// functions are those intrinsics, so this ties the host tests of WeightAt to what the kernels
// compute. Needs the CUDA headers, not a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "kernels/cuda/weight_decode.h"

namespace tpserve::cuda {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float CudaHalfToFloat(uint16_t h) {
  __half_raw raw;
  raw.x = h;
  return __half2float(__half(raw));
}

TEST(ConversionTwinTest, HalfToFloatIsCudasForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(Bits(F16BitsToF32(static_cast<uint16_t>(h))),
              Bits(CudaHalfToFloat(static_cast<uint16_t>(h))))
        << "half 0x" << std::hex << h;
  }
}

TEST(ConversionTwinTest, Fp8ToFloatIsCudasForEveryCode) {
  for (uint32_t code = 0; code < 256; ++code) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
    ASSERT_EQ(Bits(Fp8ToF32(static_cast<uint8_t>(code))), Bits(CudaHalfToFloat(h.x)))
        << "code " << code;
  }
}

// Every 131st f32 bit pattern (a prime stride: every exponent, sign and many mantissas), plus
// the patterns around each rounding boundary of e4m3 and bf16.
TEST(ConversionTwinTest, FloatToFp8AndBf16AreCudasOverASweep) {
  int64_t checked = 0, mismatches = 0;
  auto check = [&](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    const uint8_t fp8 = static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
    const uint16_t bf16 = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(f)).x;
    ++checked;
    if ((F32ToFp8(f) != fp8 || F32ToBf16Bits(f) != bf16) && ++mismatches <= 5) {
      ADD_FAILURE() << "f32 0x" << std::hex << bits << ": e4m3 0x" << int{F32ToFp8(f)}
                    << " (CUDA 0x" << int{fp8} << "), bf16 0x" << F32ToBf16Bits(f) << " (CUDA 0x"
                    << bf16 << ")";
    }
  };
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 131) {
    check(static_cast<uint32_t>(bits));
  }
  // e4m3 values, the midpoints to the next one (480 past the largest), and one ulp around.
  for (uint32_t code = 0; code < 127; ++code) {
    const float v = Fp8ToF32(static_cast<uint8_t>(code));
    const float next = code == 126 ? 480.0f : Fp8ToF32(static_cast<uint8_t>(code + 1));
    const uint32_t mid = Bits((v + next) / 2);
    for (uint32_t b : {Bits(v), Bits(next), mid, mid - 1, mid + 1}) {
      check(b);
      check(b | 0x80000000u);
    }
  }
  for (uint32_t bits : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u,
                        0x3F808000u, 0x3F818000u, 0x7F7FFFFFu}) {
    check(bits);
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(checked, 30000000);
}

}  // namespace
}  // namespace tpserve::cuda
