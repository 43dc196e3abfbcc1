// GGML "K-quant" super-blocks (Q4_K, Q5_K, Q6_K): their byte layout, the packing of Q4_K/Q5_K's
// 6-bit sub-block scales, and decoders bit-identical to the gguf Python package. DequantizeRow
// (dtype.h) calls the decoders; encoders (kernels/quantize) and dot kernels (kernels/cpu) use
// the layout constants and the scale packing from here, so there is one definition of each.
//
//   uint8_t scales[8], mins[8];
//   UnpackKScaleMins(block + kQ4_KScalesOffset, scales, mins);
//
// Every super-block holds 256 values. Byte layouts (little-endian, no padding; ggml-common.h):
//
//   Q4_K, 144 bytes: [0, 2) fp16 d   [2, 4) fp16 dmin   [4, 16) scales: 8 6-bit scales and 8
//     6-bit mins, packed as below   [16, 144) qs: 4 groups of 32 bytes; group g holds sub-block
//     2g in its low nibbles and sub-block 2g + 1 in its high nibbles, byte i = element i.
//     Sub-block j (32 values) decodes as  x = (d * scale[j]) * q - (dmin * min[j]),  q in 0..15.
//   Q5_K, 176 bytes: as Q4_K, then [16, 48) qh: bit j of byte i is bit 4 of element i of
//     sub-block j   [48, 176) qs as Q4_K's. q = low nibble | high bit << 4, in 0..31.
//   Q6_K, 210 bytes: [0, 128) ql   [128, 192) qh   [192, 208) 16 int8 scales, one per 16 values
//     [208, 210) fp16 d. Two halves of 128 values; half h uses ql[64h, 64h + 64) and
//     qh[32h, 32h + 32). Element 32k + i of a half (k < 4, i < 32) has low 4 bits from
//     ql[64h + i + 32 * (k & 1)] (low nibble for k < 2, high nibble for k >= 2) and high 2 bits
//     from bits 2k, 2k + 1 of qh[32h + i]; x = (d * scale[e / 16]) * (q - 32), q in 0..63.
//
// The 12 scale bytes of Q4_K/Q5_K (sub-block j's 6-bit scale S[j] and min M[j]):
//   bytes 0..3:  S[j] in bits 0..5, S[j + 4] bits 4..5 in bits 6..7   (j < 4)
//   bytes 4..7:  M[j] in bits 0..5, M[j + 4] bits 4..5 in bits 6..7
//   bytes 8..11: S[j + 4] bits 0..3 in bits 0..3, M[j + 4] bits 0..3 in bits 4..7
//
// Thread-safe: pure functions.
#ifndef TPSERVE_FORMATS_K_QUANT_H_
#define TPSERVE_FORMATS_K_QUANT_H_

#include <bit>
#include <cstdint>
#include <cstring>

namespace tpserve {

static_assert(std::endian::native == std::endian::little,
              "the K-quant scale words are unpacked as little-endian uint32");

inline constexpr int kKQuantBlockElems = 256;
inline constexpr int kKQuantSubBlockElems = 32;  // Q4_K / Q5_K scale groups; one Q8 block each

inline constexpr int kQ4_KBlockBytes = 144;
inline constexpr int kQ4_KScalesOffset = 4;
inline constexpr int kQ4_KQsOffset = 16;

inline constexpr int kQ5_KBlockBytes = 176;
inline constexpr int kQ5_KScalesOffset = 4;
inline constexpr int kQ5_KQhOffset = 16;
inline constexpr int kQ5_KQsOffset = 48;

inline constexpr int kQ6_KBlockBytes = 210;
inline constexpr int kQ6_KQlOffset = 0;
inline constexpr int kQ6_KQhOffset = 128;
inline constexpr int kQ6_KScalesOffset = 192;
inline constexpr int kQ6_KDOffset = 208;

// The 12 packed scale bytes of a Q4_K/Q5_K super-block -> 8 scales and 8 mins, each 0..63.
// Inline (the dot kernels call it once per super-block): four bytes at a time, each 32-bit word
// read little-endian, so byte j of a word is sub-block j (or j + 4).
inline void UnpackKScaleMins(const uint8_t* packed, uint8_t scales[8], uint8_t mins[8]) {
  uint32_t word[3];
  std::memcpy(word, packed, sizeof(word));
  const uint32_t scales_lo = word[0] & 0x3F3F3F3Fu;
  const uint32_t mins_lo = word[1] & 0x3F3F3F3Fu;
  // Bits 6..7 of bytes 0..3 (4..7) become bits 4..5 of scales (mins) 4..7.
  const uint32_t scales_hi = (word[2] & 0x0F0F0F0Fu) | ((word[0] >> 2) & 0x30303030u);
  const uint32_t mins_hi = ((word[2] >> 4) & 0x0F0F0F0Fu) | ((word[1] >> 2) & 0x30303030u);
  std::memcpy(scales, &scales_lo, 4);
  std::memcpy(scales + 4, &scales_hi, 4);
  std::memcpy(mins, &mins_lo, 4);
  std::memcpy(mins + 4, &mins_hi, 4);
}
// The inverse. REQUIRES: every scale and min <= 63.
void PackKScaleMins(const uint8_t scales[8], const uint8_t mins[8], uint8_t* packed);

// Decode `num_blocks` super-blocks into 256 * num_blocks floats, rounding as the gguf package
// does (a product, then a difference; never fused).
void DequantizeQ4_K(const uint8_t* src, float* dst, int64_t num_blocks);
void DequantizeQ5_K(const uint8_t* src, float* dst, int64_t num_blocks);
void DequantizeQ6_K(const uint8_t* src, float* dst, int64_t num_blocks);

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_K_QUANT_H_
