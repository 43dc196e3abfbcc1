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

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_TEST_VOCAB_H_
