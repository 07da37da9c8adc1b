// `loom bench` run as a user runs it: the JSON document's shape and positive figures on the tiny shared
// model (with a 32 MiB bandwidth probe, to keep it quick), the table form, and argument errors (exit 2 with a message naming the problem).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using loom::compute::testing::shared_path;


bool positive(const nlohmann::json& value) { return value.is_number() && value.get<double>() > 0; }

TEST(BenchCommand, JsonHasTheMachineTheModelAndOneResultPerConfigurationAllPositive) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto run = run_loom({"bench", "--model", kGguf, "-p", "16", "-n", "4", "-b", "1,2", "-r", "1", "--json", "-t", "2", "--probe-mb", "32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  EXPECT_EQ(doc.at("threads"), 2);
  EXPECT_EQ(doc.at("repetitions"), 1);
  const auto& machine = doc.at("machine");
  for (const char* key : {"bandwidth_bytes_per_s", "int8_peak_macs_per_s", "fma_peak_flops_per_s"}) {
    EXPECT_TRUE(positive(machine.at(key))) << key << ": " << machine.at(key);
  }
  EXPECT_FALSE(machine.at("int8_instruction").get<std::string>().empty());
  EXPECT_FALSE(machine.at("fma_instruction").get<std::string>().empty());
  const auto& model = doc.at("model");
  EXPECT_EQ(model.at("name"), "aidreams260K");
  EXPECT_EQ(model.at("type"), "f32");
  for (const char* key : {"weight_bytes", "params", "bytes_per_token", "macs_per_token"}) {
    EXPECT_TRUE(positive(model.at(key))) << key;
  }

  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), 4u) << results;
  const std::vector<std::string> tests{"pp16", "tg4", "tg4 b1", "tg4 b2"};
  const std::vector<std::string> kinds{"prefill", "generate", "batched", "batched"};
  const std::vector<int> tokens{16, 4, 4, 8};
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    EXPECT_EQ(r.at("test"), tests[i]);
    EXPECT_EQ(r.at("kind"), kinds[i]);
    EXPECT_EQ(r.at("tokens"), tokens[i]);
    EXPECT_EQ(r.at("repetitions"), 1);
    for (const char* spread : {"tokens_per_s", "ms_per_step"}) {
      for (const char* stat : {"median", "min", "max"}) EXPECT_TRUE(positive(r.at(spread).at(stat))) << tests[i] << spread << stat;
      EXPECT_LE(r.at(spread).at("min").get<double>(), r.at(spread).at("max").get<double>());
    }
    for (const char* key : {"of_bandwidth", "of_compute_peak", "of_bound"}) EXPECT_TRUE(positive(r.at(key))) << tests[i] << key;
    const std::string bound = r.at("bound");
    EXPECT_TRUE(bound == "bandwidth" || bound == "int8_peak" || bound == "fma_peak") << bound;
  }
  EXPECT_EQ(results[1].at("bound"), "bandwidth");  // generation reads every weight once per token
  EXPECT_EQ(results[0].at("bound"), "fma_peak");   // an F32 model's prefill is FP32 arithmetic
  EXPECT_NE(run.err.find("loom bench: "), std::string::npos) << "no progress line: " << run.err;
}

TEST(BenchCommand, TheTablePrintsTheProbesFirstThenOneLinePerConfiguration) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto run = run_loom({"bench", "--model", kGguf, "--n-prompt", "8", "--n-gen", "2", "--batch", "3", "--repetitions", "2", "--probe-mb", "32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.out.starts_with("machine: ")) << run.out;
  EXPECT_NE(run.out.find("GB/s"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("GMAC/s"), std::string::npos) << run.out;
  for (const char* test : {"| pp8 ", "| tg2 ", "| tg2 b3 "}) EXPECT_NE(run.out.find(test), std::string::npos) << test << "\n" << run.out;
}

TEST(BenchCommand, DepthsRepeatTheGenerationTestAfterThatMuchContext) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto run = run_loom({"bench", "--model", kGguf, "-p", "0", "-n", "4", "-d", "0,100", "-b", "2", "-r", "1", "--json", "--probe-mb", "32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), 3u) << results;
  const std::vector<std::string> tests{"tg4", "tg4 @ d100", "tg4 b2"};
  const std::vector<int> depths{0, 100, 0};
  for (std::size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].at("test"), tests[i]);
    EXPECT_EQ(results[i].at("depth"), depths[i]);
    EXPECT_TRUE(positive(results[i].at("tokens_per_s").at("median"))) << tests[i];
  }
  EXPECT_EQ(results[1].at("kind"), "generate");
  EXPECT_EQ(results[1].at("tokens"), 4);
  EXPECT_NE(run.err.find("filling 100 positions"), std::string::npos) << run.err;
}

TEST(BenchCommand, BatchNoneRunsNoBatchedTest) {
  REQUIRE_SHARED_FILE(kGguf);
  const auto run = run_loom({"bench", "--model", kGguf, "-p", "8", "-n", "2", "-b", "none", "-r", "1", "--json", "--probe-mb", "32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), 2u) << results;
  EXPECT_EQ(results[0].at("test"), "pp8");
  EXPECT_EQ(results[1].at("test"), "tg2");
}

TEST(BenchCommand, BadArgumentsExitTwoWithAMessage) {
  REQUIRE_SHARED_FILE(kGguf);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"bench"}, "bench needs --model PATH"},
      {{"bench", "--model", kGguf, "-b", "0"}, "--batch (-b) expects"},
      {{"bench", "--model", kGguf, "-b", "1,x"}, "got 'x'"},
      {{"bench", "--model", kGguf, "-b", "513"}, "[1, 512]"},
      {{"bench", "--model", kGguf, "-b", "1,,2"}, "got ''"},
      {{"bench", "--model", kGguf, "-r", "0"}, "--repetitions must be in"},
      {{"bench", "--model", kGguf, "-p", "-3"}, "--n-prompt must be in"},
      {{"bench", "--model", kGguf, "-t", "0"}, "--threads must be in"},
      {{"bench", "--model", kGguf, "-p", "0", "-n", "0"}, "nothing to run"},
      {{"bench", "--model", kGguf, "-p", "100000"}, "context length"},
      {{"bench", "--model", kGguf, "-d", "0,-1"}, "--depth (-d) expects"},
      {{"bench", "--model", kGguf, "-p", "8", "-n", "16", "-d", "0,120"}, "-d 120 plus -n 16 must fit the model's context length 128"},
      {{"bench", "--model", kGguf, "--probe-mb", "1"}, "--probe-mb must be in"},
      {{"bench", "--model", kGguf, "--frobnicate", "1"}, "unknown option --frobnicate"},
  };
  for (const auto& [args, message] : cases) {
    const auto run = run_loom(args);
    EXPECT_EQ(run.exit_code, 2) << args.back() << ": " << run.err;
    EXPECT_NE(run.err.find(message), std::string::npos) << "expected '" << message << "' in: " << run.err;
  }
}

}  // namespace
}  // namespace loom::cli::testing
