// `loom chat` at a terminal: a pseudo-terminal types lines and Ctrl-C / Ctrl-D into it, as a person would.
#include <fstream>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "run_process.hpp"
#include "test_files.hpp"

namespace loom::cli::testing {
namespace {

using loom::compute::testing::ScratchDir;
using loom::compute::testing::shared_path;
using namespace std::chrono_literals;

TEST(ChatCommand, RepliesKeepsGoingAfterCtrlCStopsAReplyAndLeavesOnCtrlD) {
  const std::string vocab_from = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(vocab_from);
  // A random-weight model with the aidreams vocabulary and a long context: with --ignore-eos its replies
  // run until stopped, so Ctrl-C lands while a reply streams.
  ScratchDir dir("chat_cli");
  const std::string model = dir.path("chat.gguf").string();
  const auto synth = run_loom({"synth", "--out", model, "--dim", "128", "--ffn", "256", "--layers", "2", "--heads", "4",
                               "--context", "4096", "--vocab-from", vocab_from, "--seed", "3"});
  ASSERT_EQ(synth.exit_code, 0) << synth.err;

  PtySession chat({"chat", "--model", model, "--chat-template", "chatml", "--system", "Be brief.", "--ignore-eos",
                   "--max-tokens", "3000", "--temperature", "1", "--seed", "1", "--threads", "1"});
  ASSERT_TRUE(chat.wait_for("> ", 0, 30s)) << chat.screen();

  // A reply streams; Ctrl-C stops it and the program stays for the next line. The key goes in only once
  // reply text is on the screen: a Ctrl-C that the terminal delivers before the program has read the line
  // also discards the line (the terminal flushes pending input on an interrupt).
  auto ask_and_interrupt = [&](const std::string& line) {
    std::size_t mark = chat.screen().size();
    chat.type(line + "\n");
    ASSERT_TRUE(chat.wait_for(line, mark, 10s)) << chat.screen();  // the terminal echoes the line
    mark = chat.screen().find(line, mark) + line.size();
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (chat.screen().size() < mark + 200 && std::chrono::steady_clock::now() < deadline) chat.pump(100ms);
    ASSERT_GE(chat.screen().size(), mark + 200) << "no reply streamed: " << chat.screen().substr(mark);
    chat.type("\x03");  // Ctrl-C: the terminal sends SIGINT to the foreground process
    ASSERT_TRUE(chat.wait_for("reply stopped", mark, 20s)) << chat.screen().substr(mark);
    mark = chat.screen().find("reply stopped", mark);
    ASSERT_TRUE(chat.wait_for("> ", mark, 10s)) << chat.screen().substr(mark);
    EXPECT_TRUE(chat.alive());
  };
  ask_and_interrupt("hello there");
  if (HasFatalFailure()) return;
  // The next turn (the conversation so far prefilled again from the cache) gets a reply too.
  ask_and_interrupt("and again");
  if (HasFatalFailure()) return;

  // Ctrl-C at the prompt does not end the program; Ctrl-D does, with success.
  chat.type("\x03");
  const std::size_t mark = chat.screen().size();
  ASSERT_TRUE(chat.wait_for("> ", mark, 10s)) << chat.screen().substr(mark);
  EXPECT_TRUE(chat.alive());
  chat.type("\x04");
  EXPECT_EQ(chat.wait_exit(20s), 0) << chat.screen();
}

TEST(ChatCommand, AnUnknownTemplateIsAUsageErrorListingTheKnownOnes) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const auto run = run_loom({"chat", "--model", model, "--chat-template", "klingon"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("klingon"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("chatml"), std::string::npos) << run.err;
}

TEST(ChatCommand, AModelWithoutATemplateChatsInChatmlAndSaysSo) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const auto run = run_loom({"chat", "--model", model, "--max-tokens", "3"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("chatml (the model has no chat template)"), std::string::npos) << run.err;
}

TEST(ChatCommand, AChatTemplateFileThatDoesNotParseIsRefusedNamingTheFile) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  const std::string file = ::testing::TempDir() + "/broken_template.jinja";
  {
    std::ofstream out(file);
    out << "{% for m in messages %}{{ m.content }}";  // no endfor
  }
  const auto run = run_loom({"chat", "--model", model, "--chat-template-file", file, "--max-tokens", "3"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find(file), std::string::npos) << run.err;
  std::remove(file.c_str());
}

TEST(ChatCommand, WithoutATerminalItPrintsNoPromptAndEndsAtEndOfInput) {
  const std::string model = shared_path("models/aidreams260K.gguf");
  REQUIRE_SHARED_FILE(model);
  // stdin is /dev/null: not a terminal, so no "> " prompt, and the end of input ends the program cleanly.
  const auto run = run_loom({"chat", "--model", model, "--chat-template", "chatml", "--max-tokens", "5"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "");
}

}  // namespace
}  // namespace loom::cli::testing
