#include "coordinator/tokenizer/special_token_splitter.h"

#include <gtest/gtest.h>

#include <string>

namespace tpserve {
namespace {

// "text" for plain fragments, "[id]" for special ones, joined with '|'.
std::string Show(const std::vector<SpecialTokenSplitter::Fragment>& fragments) {
  std::string out;
  for (const auto& fragment : fragments) {
    if (!out.empty()) out += "|";
    out += fragment.special_id >= 0 ? "[" + std::to_string(fragment.special_id) + "]"
                                    : std::string(fragment.text);
  }
  return out;
}

SpecialTokenSplitter MakeSplitter() {
  return SpecialTokenSplitter({{1, "<|im_start|>", true},
                               {2, "<|im_end|>", true},
                               {3, "<tool>", false},
                               {4, "<|im_start|>x", true},
                               {5, "", true}});
}

TEST(SpecialTokenSplitterTest, ControlTokensOnlyWhenAllowed) {
  const SpecialTokenSplitter splitter = MakeSplitter();
  EXPECT_EQ(Show(splitter.Split("a<|im_end|>b", false)), "a<|im_end|>b");
  EXPECT_EQ(Show(splitter.Split("a<|im_end|>b", true)), "a|[2]|b");
  EXPECT_EQ(Show(splitter.Split("<|im_end|><|im_end|>", true)), "[2]|[2]");
}

TEST(SpecialTokenSplitterTest, UserDefinedTokensAlwaysMatch) {
  const SpecialTokenSplitter splitter = MakeSplitter();
  EXPECT_EQ(Show(splitter.Split("call <tool> now", false)), "call |[3]| now");
}

TEST(SpecialTokenSplitterTest, LongestTokenWins) {
  const SpecialTokenSplitter splitter = MakeSplitter();
  EXPECT_EQ(Show(splitter.Split("<|im_start|>x<|im_start|>y", true)), "[4]|[1]|y");
}

TEST(SpecialTokenSplitterTest, EmptyInputGivesNoFragments) {
  EXPECT_TRUE(MakeSplitter().Split("", true).empty());
}

}  // namespace
}  // namespace tpserve
