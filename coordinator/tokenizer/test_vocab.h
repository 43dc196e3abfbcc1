// Test-only hand-made vocabulary small enough to reason about by hand: ids 0-2 control
// tokens (<|endoftext|>, <|im_start|>, <|im_end|>), id 3 the user-defined "<tool>", ids
// 4..259 the 256 single bytes (ByteId), then one token per merge of kTestMerges in order.
//
//   TokenizerData data = MakeTestTokenizerData();
//   Tokenizer tok = *Tokenizer::Create(data);   // Encode("hello world") == {263, 268}
//
// Threading: plain functions.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_TEST_VOCAB_H_
#define TPSERVE_COORDINATOR_TOKENIZER_TEST_VOCAB_H_

#include <cstdint>

#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

inline constexpr int32_t kTestEndOfText = 0;
inline constexpr int32_t kTestImStart = 1;
inline constexpr int32_t kTestImEnd = 2;
inline constexpr int32_t kTestTool = 3;
// he=260 ll=261 hell=262 hello=263 " w"=264 or=265 " wor"=266 ld=267 " world"=268
// "\xEC\x95"=269 "안"=270 (Korean U+C548, bytes EC 95 88).
inline constexpr int32_t kTestHello = 263;
inline constexpr int32_t kTestSpaceWorld = 268;
inline constexpr int32_t kTestAn = 270;
inline constexpr int32_t kTestVocabSize = 271;

inline int32_t ByteId(unsigned char byte) { return 4 + byte; }

TokenizerData MakeTestTokenizerData();

// SentencePiece-style counterpart, shaped like Gemma's: 0 "<unk>" (unknown), 1 "<s>" and 2 "</s>"
// (control), 3 "<start_of_turn>" and 4 "<end_of_turn>" (control), 5 "\n" (user-defined), ids
// 6..261 the byte tokens "<0x00>".."<0xFF>" (SpmByteId), then the normal tokens below, with
// scores chosen so that merge order matters: "ab" (-1) beats "bc" (-2); "aa" (-3) ties with
// itself, so the leftmost pair wins; "▁hi" (-0.5) forms after "hi" (-1.5). "안" (U+C548) is a
// token; "한" (U+D55C) is not, so it falls back to its three byte tokens.
inline constexpr int32_t kSpmUnk = 0;
inline constexpr int32_t kSpmBos = 1;
inline constexpr int32_t kSpmEos = 2;
inline constexpr int32_t kSpmStartOfTurn = 3;
inline constexpr int32_t kSpmEndOfTurn = 4;
inline constexpr int32_t kSpmNewline = 5;
inline constexpr int32_t kSpmSpaceSymbol = 262;  // "▁"
inline constexpr int32_t kSpmA = 263;
inline constexpr int32_t kSpmB = 264;
inline constexpr int32_t kSpmC = 265;
inline constexpr int32_t kSpmAB = 266;
inline constexpr int32_t kSpmBC = 267;
inline constexpr int32_t kSpmAA = 268;
inline constexpr int32_t kSpmSpaceA = 269;  // "▁a"
inline constexpr int32_t kSpmH = 270;
inline constexpr int32_t kSpmI = 271;
inline constexpr int32_t kSpmHI = 272;
inline constexpr int32_t kSpmSpaceHI = 273;  // "▁hi"
inline constexpr int32_t kSpmAn = 274;       // "안"
inline constexpr int32_t kSpmVocabSize = 275;

inline int32_t SpmByteId(unsigned char byte) { return 6 + byte; }

// add_space_prefix as given; BOS 1, EOS 2, UNK 0.
TokenizerData MakeTestSpmTokenizerData(bool add_space_prefix);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_TEST_VOCAB_H_
