// The calculator on the real SmolLM2-135M Q4_1 GGUF: config and per-tensor types come from
// the file, and the planned checkpoint bytes equal the file's tensor bytes.
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "model/bundled_model.h"
#include "planner/vram_cli.h"

namespace tpserve {
namespace {

TEST(VramGgufTest, PlansTheFileExactly) {
  const absl::StatusOr<std::string> model = BundledModelPath();
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::string& path = *model;
  VramRequest r;
  r.model = path;
  r.gpu = "cpu-host";
  r.host_bandwidth_gbs = 10;
  r.context = 2048;
  r.json = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunVram(r, out, err), 0) << err.str();
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["checkpoint_file_tensor_bytes"], 96'576'768);
  EXPECT_EQ(j["plan"]["totals"]["checkpoint_bytes"], 96'576'768);
  EXPECT_EQ(j["plan"]["inputs"]["weight_formats"]["embedding"], "q8_0");
  EXPECT_EQ(j["plan"]["inputs"]["weight_formats"]["down"], "q4_1");
  EXPECT_EQ(j["plan"]["inputs"]["weight_formats"]["ffn_norm"], "f32");
  EXPECT_EQ(j["plan"]["inputs"]["model"]["num_kv_heads"], 3);

  r.json = false;
  std::ostringstream table, err2;
  ASSERT_EQ(RunVram(r, table, err2), 0) << err2.str();
  EXPECT_NE(table.str().find("tensor bytes in the file: 96,576,768; planned checkpoint bytes: "
                             "96,576,768 (equal)"),
            std::string::npos)
      << table.str();
}

}  // namespace
}  // namespace tpserve
