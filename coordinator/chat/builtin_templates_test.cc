// The built-in chat formats against llama.cpp's own rendering of them
// (tests/golden/chat_templates/builtin_golden.json, made by make_builtin_golden.py with
// llama_chat_apply_template): byte for byte, after the BOS token the template adds and
// llama.cpp's tokenizer adds instead.
#include "coordinator/chat/builtin_templates.h"

#include <fstream>
#include <sstream>

#include "coordinator/chat/chat_template.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

using Json = nlohmann::json;

TEST(BuiltinTemplatesTest, GemmaRendersAsLlamaCppsGemmaFormat) {
  std::ifstream in("tests/golden/chat_templates/builtin_golden.json");
  ASSERT_TRUE(in.good());
  const Json golden = Json::parse(in);
  {
    const std::optional<std::string_view> source = BuiltinChatTemplate("gemma");
    ASSERT_TRUE(source.has_value());
    absl::StatusOr<ChatTemplate> chat =
        ChatTemplate::Create(*source, ChatTemplateTokens{"<bos>", "<eos>", "<unk>", "<pad>"});
    ASSERT_TRUE(chat.ok()) << chat.status();
    int cases = 0;
    for (const Json& c : golden["formats"]["gemma"]) {
      tpserve::v1::Chat request;
      for (const Json& m : c["messages"]) {
        tpserve::v1::ChatMessage* message = request.add_messages();
        message->set_role(m["role"].get<std::string>());
        message->set_content(m["content"].get<std::string>());
      }
      request.set_add_generation_prompt(c["add_generation_prompt"].get<bool>());
      absl::StatusOr<RenderedPrompt> prompt = chat->Render(request);
      ASSERT_TRUE(prompt.ok()) << prompt.status();
      EXPECT_EQ(prompt->Text(), "<bos>" + c["text"].get<std::string>()) << c.dump();
      ++cases;
    }
    EXPECT_EQ(cases, 10);
  }
}

TEST(BuiltinTemplatesTest, OtherNamesHaveNone) {
  for (const char* format : {"", "llama3", "chatml", "gemma2"}) {
    EXPECT_EQ(BuiltinChatTemplate(format), std::nullopt) << format;
  }
}

}  // namespace
}  // namespace tpserve
