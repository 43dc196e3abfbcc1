#include "coordinator/tokenizer/test_vocab.h"

#include <string>
#include <utility>
#include <vector>

#include "coordinator/tokenizer/byte_level.h"

namespace tpserve {

TokenizerData MakeTestTokenizerData() {
  // Raw-byte merges, in rank order; each adds the token left+right.
  const std::vector<std::pair<std::string, std::string>> raw_merges = {
      {"h", "e"},   {"l", "l"}, {"he", "ll"},   {"hell", "o"},    {" ", "w"},           {"o", "r"},
      {" w", "or"}, {"l", "d"}, {" wor", "ld"}, {"\xEC", "\x95"}, {"\xEC\x95", "\x88"},
  };
  TokenizerData data;
  data.tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"};
  data.token_types = {TokenType::kControl, TokenType::kControl, TokenType::kControl,
                      TokenType::kUserDefined};
  for (int byte = 0; byte < 256; ++byte) {
    data.tokens.push_back(ByteLevelEncode(std::string(1, static_cast<char>(byte))));
    data.token_types.push_back(TokenType::kNormal);
  }
  for (const auto& [left, right] : raw_merges) {
    data.merges.emplace_back(ByteLevelEncode(left), ByteLevelEncode(right));
    data.tokens.push_back(ByteLevelEncode(left + right));
    data.token_types.push_back(TokenType::kNormal);
  }
  data.pre_tokenizer = PreTokenizerKind::kSmolLm;
  data.eos_id = kTestImEnd;
  return data;
}

}  // namespace tpserve
