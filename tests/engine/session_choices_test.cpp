// The session's share of logprobs and of n > 1, driven through a fake scheduler: tokens whose text the stop
// matcher holds back still go out in order, each with its own log-probability, piece, bytes and alternatives;
// a request with two choices submits one sequence with one fork, streams each choice's tokens under its
// index with its own stop strings, and sends one done event once both have ended.
#include "session_fixture.hpp"

namespace loom::actors {
namespace {

std::vector<std::uint8_t> bytes_of(const std::string& piece) { return {piece.begin(), piece.end()}; }

// A suite of its own: gtest wants one fixture class per suite name, and SessionActorTest is another
// translation unit's (the fixture header's anonymous namespace).
class SessionChoicesTest : public SessionActorTest {};

TEST_F(SessionChoicesTest, HeldBackTokensKeepTheirOwnLogprobsInOrder) {
  auto session = open();
  auto request = raw_request("r1", "Once,");
  request.params.stop = {"lite"};  // " li" and "t" wait until the second "t" shows it is not "lite"
  request.params.logprobs = 2;
  generate(session, request, 1);
  const auto sink = probe_->submit(0).sink;
  const Ids tokens = encode("there was a little cat");
  const std::int32_t other = token_for(" a");
  const auto logprob_of = [](std::size_t i) { return -0.25f * static_cast<float>(i + 1); };
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    sink(SequenceToken{1, tokens[i], static_cast<std::int32_t>(i), logprob_of(i),
                       {{tokens[i], logprob_of(i)}, {other, -7.5f}}});
  }
  sink(FakeScheduler::finished(1, FinishReason::eos, {}, 3, static_cast<std::int32_t>(tokens.size()) + 1));

  const auto events = probe_->finished("r1");
  EXPECT_EQ(text_of(events), tokenizer_->decode(tokens));
  const auto token_events = tokens_of(events);
  ASSERT_EQ(ids_of(token_events), tokens);
  const auto li = static_cast<std::size_t>(std::find(tokens.begin(), tokens.end(), token_for(" li")) - tokens.begin());
  ASSERT_LT(li + 1, tokens.size());
  EXPECT_EQ(token_events[li].text, "") << "held back";
  for (std::size_t i = 0; i < token_events.size(); ++i) {
    const TokenEvent& t = token_events[i];
    SCOPED_TRACE("token " + std::to_string(i));
    ASSERT_TRUE(t.logprob.has_value());
    EXPECT_EQ(*t.logprob, static_cast<double>(logprob_of(i)));
    EXPECT_EQ(t.piece, tokenizer_->piece(tokens[i], true));
    EXPECT_EQ(t.bytes, bytes_of(tokenizer_->piece(tokens[i], true)));
    ASSERT_EQ(t.top_logprobs.size(), 2u);
    EXPECT_EQ(t.top_logprobs[0].token, tokens[i]);
    EXPECT_EQ(t.top_logprobs[1].token, other);
    EXPECT_EQ(t.top_logprobs[1].text, " a");
    EXPECT_EQ(t.top_logprobs[1].logprob, -7.5);
  }
}

TEST_F(SessionChoicesTest, TwoChoicesStreamUnderTheirIndexAndEndWithOneDone) {
  auto session = open();
  auto request = raw_request("r1", "Once,");
  request.n = 2;
  request.params.seed = 11;
  request.params.stop = {"cat"};
  generate(session, request, 5);
  const auto submit = probe_->submit(0);
  EXPECT_EQ(submit.sequence, 5u);
  EXPECT_EQ(submit.forks, (std::vector<cache::SequenceId>{6})) << "choice 1 is sequence + 1";
  EXPECT_EQ(submit.params.seed, std::optional<std::uint64_t>(11));

  const auto& sink = submit.sink;
  const Ids first = encode(" a dog");
  const Ids second = encode(" a cat ran");
  for (std::size_t i = 0; i < std::max(first.size(), second.size()); ++i) {
    if (i < first.size()) sink(SequenceToken{5, first[i], static_cast<std::int32_t>(i), std::nullopt, {}});
    if (i < second.size()) sink(SequenceToken{6, second[i], static_cast<std::int32_t>(i), std::nullopt, {}, 1});
  }
  // Choice 1 met its stop string: only its sequence is cancelled.
  const auto cancel = probe_->cancel(0);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->sequence, 6u);
  EXPECT_EQ(cancel->reason, FinishReason::stop);
  auto stopped = FakeScheduler::finished(6, FinishReason::stop, {}, 4, 3);
  stopped.choice = 1;
  sink(stopped);
  EXPECT_TRUE(probe_->events("r1").empty() || !std::holds_alternative<DoneEvent>(probe_->events("r1").back()))
      << "no done event while choice 0 runs";
  sink(FakeScheduler::finished(5, FinishReason::length, {}, 4, static_cast<std::int32_t>(first.size())));

  const auto events = probe_->finished("r1");
  std::string texts[2];
  for (const auto& t : tokens_of(events)) {
    ASSERT_TRUE(t.choice == 0 || t.choice == 1);
    texts[t.choice] += t.text;
  }
  EXPECT_EQ(texts[0], tokenizer_->decode(first));
  const std::string second_text = tokenizer_->decode(second);
  EXPECT_EQ(texts[1], second_text.substr(0, second_text.find("cat"))) << "choice 1 stops before its stop string";
  const auto done = done_of(events);
  EXPECT_EQ(done.finish_reason, FinishReason::length);  // choice 0's
  ASSERT_EQ(done.choices.size(), 2u);
  EXPECT_EQ(done.choices[0].finish_reason, FinishReason::length);
  EXPECT_EQ(done.choices[1].index, 1);
  EXPECT_EQ(done.choices[1].finish_reason, FinishReason::stop);
  EXPECT_EQ(done.choices[1].stop, std::optional<std::string>("cat"));
  EXPECT_EQ(done.usage.prompt_tokens, 4) << "the prompt once";
  EXPECT_EQ(done.usage.completion_tokens, static_cast<std::int32_t>(first.size()) + 3);
}

TEST_F(SessionChoicesTest, MoreThanOneChoiceInANamedSessionIsRefused) {
  auto session = open();
  auto request = raw_request("r1", "Once,");
  request.session_id = "s1";
  request.n = 2;
  generate(session, request, 1);
  const auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "n");
  EXPECT_EQ(probe_->submit_count(), 0u);
}

}  // namespace
}  // namespace loom::actors
