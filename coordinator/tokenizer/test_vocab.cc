#include "coordinator/tokenizer/test_vocab.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
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

TokenizerData MakeTestSpmTokenizerData(bool add_space_prefix) {
  TokenizerData data;
  data.model = TokenizerModel::kSpm;
  data.tokens = {"<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>", "\n"};
  data.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl,
                      TokenType::kControl, TokenType::kControl, TokenType::kUserDefined};
  data.scores.assign(data.tokens.size(), 0.0f);
  for (int byte = 0; byte < 256; ++byte) {
    data.tokens.push_back(absl::StrFormat("<0x%02X>", byte));
    data.token_types.push_back(TokenType::kByte);
    data.scores.push_back(0.0f);
  }
  const std::vector<std::pair<std::string, float>> normal = {
      {"\xE2\x96\x81", -5},  {"a", -6},   {"b", -6},       {"c", -6},
      {"ab", -1},             {"bc", -2},  {"aa", -3},      {"\xE2\x96\x81" "a", -4},
      {"h", -7},              {"i", -7},   {"hi", -1.5},    {"\xE2\x96\x81" "hi", -0.5},
      {"\xEC\x95\x88", -8},
  };
  for (const auto& [text, score] : normal) {
    data.tokens.push_back(text);
    data.token_types.push_back(TokenType::kNormal);
    data.scores.push_back(score);
  }
  data.add_space_prefix = add_space_prefix;
  data.add_bos_by_default = true;
  data.bos_id = kSpmBos;
  data.eos_id = kSpmEos;
  data.unk_id = kSpmUnk;
  return data;
}

}  // namespace tpserve
