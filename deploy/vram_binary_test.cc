// Runs the real //deploy:vram binary the way a person would: exit codes, stdout, stderr.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Result Vram(const std::string& args) {
  const std::string bin = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                          std::getenv("TEST_WORKSPACE") + "/deploy/vram";
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::string cmd = bin + " " + args + " >" + tmp + "/out 2>" + tmp + "/err";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status)) << cmd;
  return {WEXITSTATUS(status), Slurp(tmp + "/out"), Slurp(tmp + "/err")};
}

const char kPlan405B[] =
    "--model=405b --weights=fp8 --gpus=8 --gpu=h100-80g --context=8192 "
    "--users=10";

TEST(VramBinaryTest, PrintsThePerGpuTable) {
  const Result run = Vram(kPlan405B);
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("PER GPU (each of 8 ranks)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("= device total"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("VERDICT   FITS"), std::string::npos) << run.out;
}

TEST(VramBinaryTest, JsonParses) {
  const Result run = Vram(std::string(kPlan405B) + " --json");
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plan"]["num_ranks"], 8);
  EXPECT_TRUE(j["plan"]["num_kv_blocks"].is_number_integer());
  EXPECT_TRUE(j["plan"]["roofline"]["decode_step_s"].is_number());
}

TEST(VramBinaryTest, BadFlagsExitTwoNamingTheFlag) {
  Result run = Vram("--model=405b --gpus=abc");
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err.rfind("vram: --gpus=abc: ", 0), 0u) << run.err;
  run = Vram("--model=405b --gpuz=8");
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err, "vram: --gpuz: unknown flag (see --help)\n");
  run = Vram("--model=405b --users=0");
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err, "vram: --users=0: must be >= 1\n");
  run = Vram("--model=405b 8");
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("unexpected argument \"8\""), std::string::npos) << run.err;
}

TEST(VramBinaryTest, DashedNamesAndHelp) {
  const Result run = Vram("--model=smollm2 --gpu=cpu-host --host-bandwidth-gbs=20 --context=2048");
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("cpu-host"), std::string::npos);
  const Result help = Vram("--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--host_bandwidth_gbs"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--model"), std::string::npos);
}

}  // namespace
