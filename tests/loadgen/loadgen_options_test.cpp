// loom-loadgen's options: count ranges, URLs, and the combinations refused with a usage error.
#include "loadgen_options.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace loom::loadgen {
namespace {

Options read(std::vector<std::string> words) {
  std::vector<char*> argv{const_cast<char*>("loom-loadgen")};
  for (auto& word : words) argv.push_back(word.data());
  cli::CommandLine args(static_cast<int>(argv.size()), argv.data(), kFlags);
  return read_options(args);
}

// The usage error's text, or "" when the options were accepted.
std::string refusal(std::vector<std::string> words) {
  try {
    read(std::move(words));
  } catch (const cli::UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(CountRange, OneValueOrLowColonHigh) {
  const auto single = parse_count_range("128", "max-tokens", 1, 4096);
  EXPECT_EQ(single.low, 128);
  EXPECT_EQ(single.high, 128);
  const auto range = parse_count_range("64:512", "max-tokens", 1, 4096);
  EXPECT_EQ(range.low, 64);
  EXPECT_EQ(range.high, 512);
  EXPECT_EQ(parse_count_range("7:7", "x", 1, 10).high, 7);
}

TEST(CountRange, RefusesWhatIsNotARangeNamingTheOption) {
  for (const char* bad : {"", "abc", "5:", ":5", "1:2:3", "0", "4097", "9:3", "1.5", "-3", "3 "}) {
    try {
      parse_count_range(bad, "prompt-tokens", 1, 4096);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const cli::UsageError& error) {
      EXPECT_NE(std::string(error.what()).find("--prompt-tokens"), std::string::npos) << error.what();
    }
  }
}

TEST(Url, HttpWithOptionalPrefixAndV1) {
  auto target = parse_url("http://127.0.0.1:8080");
  EXPECT_EQ(target.protocol, Protocol::openai_http);
  EXPECT_EQ(target.host, "127.0.0.1");
  EXPECT_EQ(target.port, 8080);
  EXPECT_EQ(target.path, "");
  EXPECT_EQ(parse_url("http://localhost:1/v1/").path, "");
  EXPECT_EQ(parse_url("http://localhost:1/proxy/v1").path, "/proxy");
  EXPECT_EQ(parse_url("http://example.com").port, 80);
}

TEST(Url, WebSocketDefaultsToV1Ws) {
  auto target = parse_url("ws://[::1]:9000");
  EXPECT_EQ(target.protocol, Protocol::loom_websocket);
  EXPECT_EQ(target.host, "::1");
  EXPECT_EQ(target.port, 9000);
  EXPECT_EQ(target.path, "/v1/ws");
  EXPECT_EQ(parse_url("ws://h:1/").path, "/v1/ws");
  EXPECT_EQ(parse_url("ws://h:1/other/ws").path, "/other/ws");
}

TEST(Url, RefusesOtherSchemesTlsAndMalformedAuthorities) {
  for (const char* bad : {"https://h:1", "wss://h:1", "ftp://h", "127.0.0.1:8080", "http://:80", "http://h:0",
                          "http://h:65536", "http://h:80x", "http://[::1", "http://[::1]x", "http://h:1/a?b=c"}) {
    EXPECT_THROW(parse_url(bad), cli::UsageError) << bad;
  }
}

TEST(Options, Defaults) {
  const Options options = read({});
  EXPECT_EQ(options.target.port, 8080);
  EXPECT_EQ(options.concurrency, 1);
  EXPECT_EQ(options.requests, 100);
  EXPECT_FALSE(options.duration_s);
  EXPECT_EQ(options.temperature, 0);
  EXPECT_TRUE(options.ignore_eos);
  EXPECT_TRUE(options.calibrate);
  EXPECT_EQ(options.progress, Progress::automatic);
}

TEST(Options, ReadsEveryOption) {
  const Options options =
      read({"--url", "ws://10.0.0.1:9/x", "--endpoint", "chat", "--api-key", "k", "--model", "m", "--concurrency",
            "16", "--duration", "2.5", "--timeout", "3", "--prompt-tokens", "10:20", "--max-tokens", "5",
            "--shared-prefix-tokens", "8", "--temperature", "0.7", "--no-ignore-eos", "--no-calibrate", "--seed", "9", "--json", "--quiet",
            "--max-message-bytes", "4096"});
  EXPECT_EQ(options.target.path, "/x");
  EXPECT_EQ(options.endpoint, Endpoint::chat);
  EXPECT_EQ(options.api_key, "k");
  EXPECT_EQ(options.model, "m");
  EXPECT_EQ(options.concurrency, 16);
  EXPECT_FALSE(options.requests);
  EXPECT_EQ(options.duration_s, 2.5);
  EXPECT_EQ(options.timeout_s, 3);
  EXPECT_EQ(options.prompt_tokens.low, 10);
  EXPECT_EQ(options.prompt_tokens.high, 20);
  EXPECT_EQ(options.max_tokens.low, 5);
  EXPECT_EQ(options.shared_prefix_tokens, 8);
  EXPECT_EQ(options.temperature, 0.7);
  EXPECT_FALSE(options.ignore_eos);
  EXPECT_FALSE(options.calibrate);
  EXPECT_EQ(options.seed, 9u);
  EXPECT_TRUE(options.json);
  EXPECT_EQ(options.progress, Progress::off);
  EXPECT_EQ(options.max_message_bytes, 4096u);
}

TEST(Options, RefusesContradictionsAndOutOfRangeValues) {
  EXPECT_NE(refusal({"--requests", "5", "--duration", "1"}).find("not both"), std::string::npos);
  EXPECT_NE(refusal({"--quiet", "--progress"}).find("not both"), std::string::npos);
  EXPECT_NE(refusal({"--url", "ws://h:1", "--endpoint", "both"}).find("--endpoint"), std::string::npos);
  EXPECT_NE(refusal({"--endpoint", "embeddings"}).find("--endpoint"), std::string::npos);
  EXPECT_NE(refusal({"--concurrency", "0"}).find("--concurrency"), std::string::npos);
  EXPECT_NE(refusal({"--concurrency", "5000"}).find("--concurrency"), std::string::npos);
  EXPECT_NE(refusal({"--requests", "0"}).find("--requests"), std::string::npos);
  EXPECT_NE(refusal({"--duration", "0"}).find("--duration"), std::string::npos);
  EXPECT_NE(refusal({"--timeout", "-1"}).find("--timeout"), std::string::npos);
  EXPECT_NE(refusal({"--temperature", "hot"}).find("--temperature"), std::string::npos);
  EXPECT_NE(refusal({"--max-message-bytes", "10"}).find("--max-message-bytes"), std::string::npos);
  EXPECT_NE(refusal({"--concurrency"}).find("needs a value"), std::string::npos);
  // A prefix as long as the shortest prompt would leave that prompt nothing of its own.
  EXPECT_NE(refusal({"--prompt-tokens", "64:128", "--shared-prefix-tokens", "64"}).find("--shared-prefix-tokens"),
            std::string::npos);
  EXPECT_EQ(refusal({"--prompt-tokens", "64:128", "--shared-prefix-tokens", "63"}), "");
  EXPECT_NE(refusal({"--bogus", "1"}).find("unknown option --bogus"), std::string::npos);
  EXPECT_NE(refusal({"stray"}).find("unexpected argument 'stray'"), std::string::npos);
  EXPECT_EQ(refusal({"--requests", "5"}), "");
}

}  // namespace
}  // namespace loom::loadgen
