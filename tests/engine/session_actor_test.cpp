// SessionActor against a fake scheduler: the fake records what the session submits and cancels, and
// either plays a scripted reply through the sequence's sink or leaves the test to drive the sink itself.
// The tokenizer is the real one of the shared aidreams260K model (SentencePiece, BOS added, byte fallback
// tokens <0xNN> = id 3 + byte, EOS 2, no EOT); chat requests use the chatml template given explicitly
// (the model names none).
#include "session_fixture.hpp"

namespace loom::actors {
namespace {

// ---- one request at a time ----

TEST_F(SessionActorTest, ASecondRequestWhileOneRunsIsAConflictAndLeavesTheFirstAlone) {
  auto session = open();
  generate(session, raw_request("a", "Once upon"), 1);  // no script: it keeps running
  probe_->submit(0);
  generate(session, raw_request("b", "Another"), 2);
  const auto error = error_of(probe_->finished("b"));
  EXPECT_EQ(error.code, ErrorCode::conflict);
  EXPECT_EQ(error.request_id, "b");
  EXPECT_EQ(error.message, "session s1 is already generating request a");
  EXPECT_EQ(probe_->submit_count(), 1u);
  EXPECT_EQ(info(session).active_request, std::optional<std::string>("a"));

  // The first one is undisturbed: it still streams and ends.
  const auto sink = probe_->submit(0).sink;
  sink(SequenceToken{1, token_for(" a"), 0, std::nullopt, {}});
  sink(FakeScheduler::finished(1, FinishReason::eos, {}, 3, 2));
  const auto events = probe_->finished("a");
  EXPECT_EQ(tokens_of(events).size(), 1u);
  EXPECT_EQ(done_of(events).finish_reason, FinishReason::eos);
  EXPECT_EQ(info(session).active_request, std::nullopt);
}

// ---- raw prompts ----

TEST_F(SessionActorTest, ARawPromptIsSubmittedAsTheTokenizerEncodesItWithTheRequestSettings) {
  auto session = open();
  auto request = raw_request("r1", "Once upon a time");
  request.params.temperature = 0.5;
  request.params.top_k = 7;
  request.params.top_p = 0.9;
  request.params.min_p = 0.1;
  request.params.repetition_penalty = 1.2;
  request.params.frequency_penalty = 0.3;
  request.params.presence_penalty = -0.4;
  request.params.repetition_last_n = 17;
  request.params.seed = 1234;
  request.params.max_tokens = 17;
  request.params.logprobs = 2;
  request.params.stop_token_ids = {5, 6};
  request.priority = 3;
  const auto deadline = std::chrono::steady_clock::now() + 1h;
  const auto accepted = std::chrono::steady_clock::now() - 1s;
  SessionGenerate m{request, 42, probe_->sink(), deadline, accepted};
  session.tell(std::move(m));

  const auto submit = probe_->submit(0);
  EXPECT_EQ(submit.sequence, 42u);
  EXPECT_EQ(submit.prompt, compute::encode_prompt(*tokenizer_, "Once upon a time", false));
  EXPECT_EQ(submit.prompt.front(), 1) << "BOS first: the vocabulary adds it";
  EXPECT_FLOAT_EQ(submit.params.temperature, 0.5f);
  EXPECT_EQ(submit.params.top_k, 7);
  EXPECT_FLOAT_EQ(submit.params.top_p, 0.9f);
  EXPECT_FLOAT_EQ(submit.params.min_p, 0.1f);
  EXPECT_FLOAT_EQ(submit.params.repetition_penalty, 1.2f);
  EXPECT_FLOAT_EQ(submit.params.frequency_penalty, 0.3f);
  EXPECT_FLOAT_EQ(submit.params.presence_penalty, -0.4f);
  EXPECT_EQ(submit.params.repetition_last_n, 17);
  EXPECT_EQ(submit.params.seed, 1234u);
  EXPECT_EQ(submit.params.max_tokens, 17);
  EXPECT_EQ(submit.params.logprobs, 2);
  EXPECT_EQ(submit.end_ids, (Ids{kEos}));
  EXPECT_EQ(submit.params.stop_token_ids, (Ids{5, 6}));
  EXPECT_EQ(submit.priority, 3);
  EXPECT_EQ(submit.fairness_key, "s1");
  EXPECT_EQ(submit.deadline, std::optional(deadline));
  EXPECT_EQ(submit.accepted, accepted);
  EXPECT_TRUE(static_cast<bool>(submit.sink));
  EXPECT_EQ(info(session).last_prompt_tokens, static_cast<std::int32_t>(submit.prompt.size()));
}

TEST_F(SessionActorTest, ARawPromptContinuesTheTranscriptOfTheSystemPromptAndEarlierTurns) {
  auto session = open("Dreams: ");
  reply_with(" there was a cat.");
  generate(session, raw_request("r1", "Once upon a time,"), 1);
  const std::string reply = text_of(probe_->finished("r1"));
  EXPECT_EQ(reply, tokenizer_->decode(encode(" there was a cat.")));
  EXPECT_EQ(probe_->submit(0).prompt, compute::encode_prompt(*tokenizer_, "Dreams: Once upon a time,", false));

  reply_with(" The end.");
  generate(session, raw_request("r2", " The cat"), 2);
  probe_->finished("r2");
  EXPECT_EQ(probe_->submit(1).prompt,
            compute::encode_prompt(*tokenizer_, "Dreams: Once upon a time," + reply + " The cat", false));
}

TEST_F(SessionActorTest, IgnoreEosSubmitsNoEndIds) {
  auto session = open();
  auto request = raw_request("r1", "Once");
  request.params.ignore_eos = true;
  generate(session, request, 1);
  EXPECT_TRUE(probe_->submit(0).end_ids.empty());
}

TEST_F(SessionActorTest, AnAbsentSeedIsDrawnAtRandom) {
  auto session = open();
  std::vector<std::uint64_t> seeds;
  for (int i = 0; i < 3; ++i) {
    probe_->add_script({});
    generate(session, raw_request("r" + std::to_string(i), "Once"), static_cast<cache::SequenceId>(i + 1));
    probe_->finished("r" + std::to_string(i));
    seeds.push_back(probe_->submit(static_cast<std::size_t>(i)).params.seed.value());
  }
  // Three equal 64-bit draws would mean the seed is not drawn at all.
  EXPECT_FALSE(seeds[0] == seeds[1] && seeds[1] == seeds[2]);
}

TEST_F(SessionActorTest, AStopTokenIdOutsideTheVocabularyIsRefusedNamingIt) {
  auto session = open();
  auto request = raw_request("r1", "Once");
  request.params.stop_token_ids = {5, 512};
  generate(session, request, 1);
  const auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "params.stop_token_ids[1]");
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionActorTest, BadSamplingValuesBuiltByACallerAreRefusedNotSubmitted) {
  auto session = open();
  auto request = raw_request("r1", "Once");
  request.params.top_p = 0.0;
  generate(session, request, 1);
  auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  // The wire parser's own rule and field name: the session checks a built request with proto's parser.
  EXPECT_EQ(error.field, "params.top_p");
  EXPECT_NE(error.message.find("(0, 1]"), std::string::npos) << error.message;

  request = raw_request("r2", "Once");
  request.params.stop = {"ok", ""};
  generate(session, request, 2);
  error = error_of(probe_->finished("r2"));
  EXPECT_EQ(error.field, "params.stop[1]");

  request = raw_request("r3", "Once");
  request.params.max_tokens = 0;
  generate(session, request, 3);
  EXPECT_EQ(error_of(probe_->finished("r3")).field, "params.max_tokens");

  // Beyond a gateway's deployment limits is fine for an application's request: only the fixed ranges hold.
  request = raw_request("r4", "Once");
  request.params.logit_bias = {{3, 150.0}};
  generate(session, request, 4);
  EXPECT_EQ(error_of(probe_->finished("r4")).field, "params.logit_bias.3");
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionActorTest, ALogitBiasTokenOutsideTheVocabularyIsRefusedNamingIt) {
  auto session = open();
  auto request = raw_request("r1", "Once");
  request.params.logit_bias = {{5, -100.0}, {512, 1.0}};
  generate(session, request, 1);
  const auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "params.logit_bias.512");
  EXPECT_NE(error.message.find("outside the vocabulary"), std::string::npos) << error.message;
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionActorTest, AGrammarThatDoesNotCompileIsRefusedWithItsLineAndColumn) {
  auto session = open();
  auto request = raw_request("r1", "Once");
  request.params.constraint = proto::OutputConstraint{proto::OutputConstraint::Kind::grammar, "root ::= \"a\"\nitem ::= (\"b\""};
  generate(session, request, 1);
  const auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "params.grammar");
  EXPECT_NE(error.message.find("line 2, column"), std::string::npos) << error.message;

  request = raw_request("r2", "Once");
  request.params.constraint = proto::OutputConstraint{proto::OutputConstraint::Kind::grammar, "item ::= \"b\""};
  generate(session, request, 2);
  EXPECT_EQ(error_of(probe_->finished("r2")).field, "params.grammar");  // no root rule
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionActorTest, ASchemaTheConverterRefusesIsRefusedNamingTheKeyword) {
  auto session = open();
  auto request = raw_request("r1", "Once");
  request.params.constraint = proto::OutputConstraint{proto::OutputConstraint::Kind::json_schema,
                                                      R"({"type":"object","properties":{"a":{"not":{}}}})"};
  generate(session, request, 1);
  const auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "params.json_schema");
  EXPECT_NE(error.message.find("not"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("/properties/a"), std::string::npos) << error.message;
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionActorTest, AConstrainedRequestIsSubmittedWithItsConstraint) {
  auto session = open();
  auto request = raw_request("r1", "Once");
  request.params.constraint = proto::OutputConstraint{proto::OutputConstraint::Kind::json_object, ""};
  generate(session, request, 1);
  EXPECT_EQ(probe_->submit(0).params.constraint, request.params.constraint);
}

TEST_F(SessionActorTest, AnEmptyPromptWithoutBosIsRefused) {
  auto vocabulary = vocabulary_;
  vocabulary.add_bos = false;
  auto no_bos = std::make_shared<const compute::Tokenizer>(std::move(vocabulary));
  auto session = open(std::nullopt, context(1024, ChatTemplate::chatml, no_bos));
  generate(session, raw_request("r1", ""), 1);
  const auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "prompt");
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionActorTest, ARawPromptTooLongForTheContextIsRefusedNotTrimmed) {
  auto session = open(std::nullopt, context(16));
  const std::string prompt = "Once upon a time, there was a little cat who liked to dream of the sea.";
  ASSERT_GE(compute::encode_prompt(*tokenizer_, prompt, false).size(), 16u);
  generate(session, raw_request("r1", prompt), 1);
  const auto error = error_of(probe_->finished("r1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "prompt");
  EXPECT_NE(error.message.find("the context holds 16"), std::string::npos) << error.message;
  EXPECT_EQ(probe_->submit_count(), 0u);
}

// ---- chat ----

TEST_F(SessionActorTest, ChatTurnTwoRendersTheSystemPromptTurnOneAndItsReply) {
  auto session = open("You dream.");
  reply_with("Hello there.");
  generate(session, chat_request("c1", {{ChatRole::user, "Hi"}}), 1);
  const std::string reply1 = text_of(probe_->finished("c1"));
  ASSERT_FALSE(reply1.empty());
  EXPECT_EQ(probe_->submit(0).prompt,
            chat_prompt({{ChatTurnRole::system, "You dream."}, {ChatTurnRole::user, "Hi"}}));

  reply_with("Fine.");
  generate(session, chat_request("c2", {{ChatRole::user, "How are you?"}}), 2);
  probe_->finished("c2");
  EXPECT_EQ(probe_->submit(1).prompt, chat_prompt({{ChatTurnRole::system, "You dream."},
                                                   {ChatTurnRole::user, "Hi"},
                                                   {ChatTurnRole::assistant, reply1},
                                                   {ChatTurnRole::user, "How are you?"}}));
  EXPECT_EQ(info(session).history_messages, 4u);
}

TEST_F(SessionActorTest, ARequestSystemMessageReplacesTheSessionSystemPromptForItsTurn) {
  auto session = open("You dream.");
  reply_with("Yes.");
  generate(session, chat_request("c1", {{ChatRole::user, "Hi"}, {ChatRole::system, "Be brief."}}), 1);
  probe_->finished("c1");
  EXPECT_EQ(probe_->submit(0).prompt,
            chat_prompt({{ChatTurnRole::system, "Be brief."}, {ChatTurnRole::user, "Hi"}}));
  // It is not kept: the next turn has the session's system prompt again.
  reply_with("No.");
  generate(session, chat_request("c2", {{ChatRole::user, "Sure?"}}), 2);
  probe_->finished("c2");
  EXPECT_EQ(probe_->submit(1).prompt, chat_prompt({{ChatTurnRole::system, "You dream."},
                                                   {ChatTurnRole::user, "Hi"},
                                                   {ChatTurnRole::assistant, tokenizer_->decode(encode("Yes."))},
                                                   {ChatTurnRole::user, "Sure?"}}));
}

TEST_F(SessionActorTest, ChatWithoutATemplateIsUnsupportedAndAToolMessageToo) {
  auto session = open(std::nullopt, context(1024, std::nullopt));
  generate(session, chat_request("c1", {{ChatRole::user, "Hi"}}), 1);
  auto error = error_of(probe_->finished("c1"));
  EXPECT_EQ(error.code, ErrorCode::unsupported);
  EXPECT_NE(error.message.find("chat template"), std::string::npos) << error.message;

  auto with_template = open();
  generate(with_template, chat_request("c2", {{ChatRole::user, "Hi"}, {ChatRole::tool, "{}"}}), 2);
  error = error_of(probe_->finished("c2"));
  EXPECT_EQ(error.code, ErrorCode::unsupported);
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionActorTest, ATemplateEndOfTurnMarkerWrittenAsTextEndsTheTurnAsEos) {
  auto session = open();
  // The model writes "<|im_end|>" as plain text (this vocabulary has no such token).
  probe_->add_script({.tokens = encode("Yes.<|im_end|> more"), .end = Script::End::wait});
  generate(session, chat_request("c1", {{ChatRole::user, "Hi"}}), 1);
  const auto events = probe_->finished("c1");
  EXPECT_EQ(text_of(events), tokenizer_->decode(encode("Yes.")));
  const auto done = done_of(events);
  EXPECT_EQ(done.finish_reason, FinishReason::eos);
  EXPECT_EQ(done.stop, std::nullopt);
  const auto cancel = probe_->cancel(0);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->reason, FinishReason::stop);
  // The history keeps the reply as shown, without the marker.
  reply_with("Ok.");
  generate(session, chat_request("c2", {{ChatRole::user, "And?"}}), 2);
  probe_->finished("c2");
  EXPECT_EQ(probe_->submit(1).prompt, chat_prompt({{ChatTurnRole::user, "Hi"},
                                                   {ChatTurnRole::assistant, tokenizer_->decode(encode("Yes."))},
                                                   {ChatTurnRole::user, "And?"}}));
}

TEST_F(SessionActorTest, TrimmingDropsTheOldestExchangeAndKeepsTheSystemAndTheLastMessage) {
  const ChatTurn system{ChatTurnRole::system, "You dream."};
  const ChatTurn u1{ChatTurnRole::user, "Hi"};
  const std::string a1_text = "Hello.";
  const ChatTurn u2{ChatTurnRole::user, "Tell me about the cat."};
  const std::string a2_text = "The cat was little and liked the sun.";
  const ChatTurn u3{ChatTurnRole::user, "What did the cat dream of?"};
  const std::string a3_text = "It dreamed of the sea and of a big fish.";
  const ChatTurn u4{ChatTurnRole::user, "And then, what happened to the little cat at the end?"};
  // The replies as the session will show them (decoded from the tokens the fake plays).
  const ChatTurn a1{ChatTurnRole::assistant, tokenizer_->decode(encode(a1_text))};
  const ChatTurn a2{ChatTurnRole::assistant, tokenizer_->decode(encode(a2_text))};
  const ChatTurn a3{ChatTurnRole::assistant, tokenizer_->decode(encode(a3_text))};

  // A context that holds turns 1 to 3 whole, and turn 4 once u1 alone is dropped: the session drops the
  // first exchange (u1 with its reply a1) all the same, so that the history never starts with a reply.
  const auto trimmed = chat_prompt({system, u2, a2, u3, a3, u4});
  const auto context_length = static_cast<std::int64_t>(chat_prompt({system, a1, u2, a2, u3, a3, u4}).size()) + 1;
  ASSERT_LT(static_cast<std::int64_t>(chat_prompt({system, u1, a1, u2, a2, u3}).size()), context_length);
  ASSERT_GE(static_cast<std::int64_t>(chat_prompt({system, u1, a1, u2, a2, u3, a3, u4}).size()), context_length);

  auto session = open("You dream.", context(context_length));
  reply_with(a1_text);
  generate(session, chat_request("t1", {{ChatRole::user, u1.content}}), 1);
  probe_->finished("t1");
  reply_with(a2_text);
  generate(session, chat_request("t2", {{ChatRole::user, u2.content}}), 2);
  probe_->finished("t2");
  reply_with(a3_text);
  generate(session, chat_request("t3", {{ChatRole::user, u3.content}}), 3);
  EXPECT_EQ(done_of(probe_->finished("t3")).usage.trimmed_messages, 0);
  EXPECT_EQ(probe_->submit(2).prompt, chat_prompt({system, u1, a1, u2, a2, u3}));
  EXPECT_EQ(info(session).dropped_messages, 0u);

  reply_with("Fine.");
  generate(session, chat_request("t4", {{ChatRole::user, u4.content}}), 4);
  EXPECT_EQ(done_of(probe_->finished("t4")).usage.trimmed_messages, 2) << "the done event says so";
  EXPECT_EQ(probe_->submit(3).prompt, trimmed);
  const auto after = info(session);
  EXPECT_EQ(after.dropped_messages, 2u);
  EXPECT_EQ(after.history_messages, 6u);  // u2 a2 u3 a3 u4 and the reply to u4
}

TEST_F(SessionActorTest, TrimmingDropsEarlierMessagesOfTheRequestButNeverItsLast) {
  const ChatTurn system{ChatTurnRole::system, "You dream."};
  const ChatTurn x{ChatTurnRole::user, "Once upon a time, there was a little cat."};
  const ChatTurn y{ChatTurnRole::assistant, "The cat liked to dream of the sea."};
  const ChatTurn z{ChatTurnRole::user, "What then?"};
  const auto last_only = chat_prompt({system, z});
  const auto context_length = static_cast<std::int64_t>(last_only.size()) + 1;
  ASSERT_GE(static_cast<std::int64_t>(chat_prompt({system, y, z}).size()), context_length);

  auto session = open("You dream.", context(context_length));
  reply_with("Nothing.");
  generate(session,
           chat_request("c1", {{ChatRole::user, x.content}, {ChatRole::assistant, y.content}, {ChatRole::user, z.content}}),
           1);
  EXPECT_EQ(done_of(probe_->finished("c1")).usage.trimmed_messages, 2);
  EXPECT_EQ(probe_->submit(0).prompt, last_only);
  const auto after = info(session);
  EXPECT_EQ(after.dropped_messages, 2u);
  EXPECT_EQ(after.history_messages, 2u);  // z and its reply
}

TEST_F(SessionActorTest, AMessageTooLongForTheContextAloneIsRefusedAndTheHistoryKept) {
  const ChatTurn system{ChatTurnRole::system, "You dream."};
  const std::string long_text = "Once upon a time, there was a little cat who liked to dream of the sea and the sun.";
  // Room for turn 1 and not for the long message even alone with the system prompt.
  const auto context_length = static_cast<std::int64_t>(chat_prompt({system, {ChatTurnRole::user, "Hi"}}).size()) + 1;
  const auto alone = chat_prompt({system, {ChatTurnRole::user, long_text}}).size();
  ASSERT_GE(static_cast<std::int64_t>(alone), context_length);

  auto session = open("You dream.", context(context_length));
  reply_with("Hello.");
  generate(session, chat_request("t1", {{ChatRole::user, "Hi"}}), 1);
  probe_->finished("t1");
  ASSERT_EQ(info(session).history_messages, 2u);

  generate(session, chat_request("t2", {{ChatRole::user, long_text}}), 2);
  const auto error = error_of(probe_->finished("t2"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "messages");
  EXPECT_EQ(error.message, "the prompt is " + std::to_string(alone) + " tokens with the chat template; at most " +
                               std::to_string(context_length - 1) + " fit (the context holds " +
                               std::to_string(context_length) + " and one more is needed to generate)");
  EXPECT_EQ(probe_->submit_count(), 1u);
  const auto after = info(session);
  EXPECT_EQ(after.history_messages, 2u) << "a refused request changes nothing";
  EXPECT_EQ(after.dropped_messages, 0u);
}

// ---- streaming text ----

TEST_F(SessionActorTest, AStopStringAcrossTokensIsNeverShownAndCancelsTheSequence) {
  auto session = open();
  const Ids tokens = encode("Once upon a time, there was a little cat.");
  const std::string full = tokenizer_->decode(tokens);
  const std::string before = full.substr(0, full.find("little"));
  // " a", " li", "t", "t", "le": the stop string starts inside " li".
  const auto at = std::find(tokens.begin(), tokens.end(), token_for(" li"));
  ASSERT_NE(at, tokens.end());
  const auto shown_tokens = static_cast<std::size_t>(at - tokens.begin()) + 1;  // " li" carries its space
  probe_->add_script({.tokens = tokens, .end = Script::End::wait});
  auto request = raw_request("r1", "Dream:");
  request.params.stop = {"nothing", "little"};
  generate(session, request, 7);

  const auto events = probe_->finished("r1");
  const auto token_events = tokens_of(events);
  EXPECT_EQ(text_of(events), before);
  EXPECT_EQ(ids_of(token_events), Ids(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(shown_tokens)));
  for (std::size_t i = 0; i < token_events.size(); ++i) EXPECT_EQ(token_events[i].index, static_cast<std::int32_t>(i));
  const auto cancel = probe_->cancel(0);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->sequence, 7u);
  EXPECT_EQ(cancel->reason, FinishReason::stop);
  const auto done = done_of(events);
  EXPECT_EQ(done.finish_reason, FinishReason::stop);
  EXPECT_EQ(done.stop, std::optional<std::string>("little"));
  EXPECT_EQ(done.usage.prompt_tokens, static_cast<std::int32_t>(probe_->submit(0).prompt.size()));
  EXPECT_EQ(done.usage.completion_tokens, static_cast<std::int32_t>(tokens.size()));
  EXPECT_EQ(done.usage.cached_tokens, 3);
  EXPECT_EQ(done.timings, kTimings);
  EXPECT_EQ(done.error_message, std::nullopt);

  // The transcript keeps the text as shown.
  reply_with(" The end.");
  generate(session, raw_request("r2", "!"), 8);
  probe_->finished("r2");
  EXPECT_EQ(probe_->submit(1).prompt,
            compute::encode_prompt(*tokenizer_, "Dream:" + before + "!", false));
}

TEST_F(SessionActorTest, HeldBackTextThatDoesNotBecomeAStopStringIsReleased) {
  auto session = open();
  const std::string text = "there was a little cat";
  const Ids tokens = encode(text);
  probe_->add_script({.tokens = tokens});
  auto request = raw_request("r1", "Once,");
  request.params.stop = {"lite", "cat!"};  // "lit" and "cat" are held back, then turn out not to match
  generate(session, request, 1);

  const auto events = probe_->finished("r1");
  const auto token_events = tokens_of(events);
  EXPECT_EQ(text_of(events), tokenizer_->decode(tokens));
  EXPECT_EQ(ids_of(token_events), tokens) << "every token is sent";
  // " li" and the first "t" wait with their text until the second "t" shows it is not "lite".
  const auto li = static_cast<std::size_t>(std::find(tokens.begin(), tokens.end(), token_for(" li")) - tokens.begin());
  ASSERT_LT(li + 2, tokens.size());
  ASSERT_EQ(tokenizer_->piece(tokens[li + 1]), "t");
  ASSERT_EQ(tokenizer_->piece(tokens[li + 2]), "t");
  EXPECT_EQ(token_events[li].text, "");
  EXPECT_EQ(token_events[li + 1].text, "");
  EXPECT_EQ(token_events[li + 2].text, " litt");
  // "cat" at the very end was still held when the sequence finished: it goes out with the last token.
  const auto n = tokens.size();
  ASSERT_EQ(tokenizer_->piece(tokens[n - 2]), " c");
  ASSERT_EQ(tokenizer_->piece(tokens[n - 1]), "at");
  EXPECT_EQ(token_events[n - 2].text, "");
  EXPECT_EQ(token_events[n - 1].text, " cat");
  const auto done = done_of(events);
  EXPECT_EQ(done.finish_reason, FinishReason::eos);
  EXPECT_EQ(done.stop, std::nullopt);
  EXPECT_EQ(probe_->cancel_count(), 0u);
}

TEST_F(SessionActorTest, AUtf8CharacterSplitOverByteTokensComesWithItsLastByte) {
  auto session = open();
  // " h" é(C3 A9) "l" "l" "o" " " €(E2 82 AC)
  const Ids tokens = {token_for(" h"), byte_token(0xC3), byte_token(0xA9), token_for("l"), byte_token(' '),
                      byte_token(0xE2), byte_token(0x82), byte_token(0xAC)};
  probe_->add_script({.tokens = tokens, .logprob = -0.25f});
  auto request = raw_request("r1", "Say:");
  request.params.logprobs = 1;
  generate(session, request, 1);

  const auto events = probe_->finished("r1");
  const auto token_events = tokens_of(events);
  ASSERT_EQ(token_events.size(), tokens.size());
  const std::vector<std::string> texts = {" h", "", "\xC3\xA9", "l", " ", "", "", "\xE2\x82\xAC"};
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(token_events[i].token, tokens[i]);
    EXPECT_EQ(token_events[i].text, texts[i]) << "event " << i;
    EXPECT_EQ(token_events[i].index, static_cast<std::int32_t>(i));
    EXPECT_EQ(token_events[i].logprob, std::optional<double>(-0.25));
    EXPECT_TRUE(valid_utf8(token_events[i].text));
  }
  EXPECT_EQ(text_of(events), " h\xC3\xA9l \xE2\x82\xAC");
}

TEST_F(SessionActorTest, ACharacterNeverCompletedEndsAsReplacementCharactersOnTheLastToken) {
  auto session = open();
  probe_->add_script({.tokens = {token_for(" h"), byte_token(0xE2), byte_token(0x82)}});
  generate(session, raw_request("r1", "Say:"), 1);
  const auto token_events = tokens_of(probe_->finished("r1"));
  ASSERT_EQ(token_events.size(), 3u);
  EXPECT_EQ(token_events[0].text, " h");
  EXPECT_EQ(token_events[1].text, "");
  EXPECT_EQ(token_events[2].text, "\xEF\xBF\xBD\xEF\xBF\xBD");  // one U+FFFD per byte held
  EXPECT_EQ(token_events[0].logprob, std::nullopt);
}

// ---- endings ----

TEST_F(SessionActorTest, ARejectedSubmitIsOneErrorEventAndRecordsNothing) {
  auto session = open();
  probe_->add_script({.tokens = {}, .end = Script::End::reject, .reject_code = ErrorCode::overloaded});
  generate(session, chat_request("c1", {{ChatRole::user, "Hi"}}), 1);
  const auto error = error_of(probe_->finished("c1"));
  EXPECT_EQ(error.code, ErrorCode::overloaded);
  EXPECT_EQ(error.request_id, "c1");
  EXPECT_EQ(error.message, "the waiting queue is full");
  const auto after = info(session);
  EXPECT_EQ(after.active_request, std::nullopt);
  EXPECT_EQ(after.history_messages, 0u);
  EXPECT_EQ(after.requests, 0u);

  // The session is free again.
  reply_with("Yes.");
  generate(session, chat_request("c2", {{ChatRole::user, "Hi"}}), 2);
  EXPECT_EQ(done_of(probe_->finished("c2")).finish_reason, FinishReason::eos);
  EXPECT_EQ(info(session).requests, 1u);
}

TEST_F(SessionActorTest, AnErrorEndingCarriesItsMessageAndIsNotRecorded) {
  auto session = open();
  probe_->add_script({.tokens = encode("Yes"), .reason = FinishReason::error, .error = "step 3 failed"});
  generate(session, chat_request("c1", {{ChatRole::user, "Hi"}}), 1);
  const auto done = done_of(probe_->finished("c1"));
  EXPECT_EQ(done.finish_reason, FinishReason::error);
  EXPECT_EQ(done.error_message, std::optional<std::string>("step 3 failed"));
  EXPECT_EQ(info(session).history_messages, 0u);
}

TEST_F(SessionActorTest, CancelTellsTheSchedulerAndItsFinishBecomesADoneCancelled) {
  auto session = open();
  generate(session, chat_request("c1", {{ChatRole::user, "Hi"}}), 9);
  const auto sink = probe_->submit(0).sink;
  sink(SequenceToken{9, token_for(" a"), 0, std::nullopt, {}});
  probe_->wait_for_events("c1", 1);

  session.tell(SessionCancel{"not-running"});
  session.tell(SessionCancel{"c1"});
  const auto cancel = probe_->cancel(0);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->sequence, 9u);
  EXPECT_EQ(cancel->reason, FinishReason::cancelled);
  const auto events = probe_->finished("c1");
  EXPECT_EQ(tokens_of(events).size(), 1u);
  EXPECT_EQ(done_of(events).finish_reason, FinishReason::cancelled);
  EXPECT_EQ(probe_->cancel_count(), 1u) << "the unknown id cancelled nothing";
  EXPECT_EQ(info(session).history_messages, 2u) << "a cancelled reply is kept as far as it went";
}

TEST_F(SessionActorTest, CloseSessionCancelsTheRunningRequestAndStopsAfterItsDone) {
  auto session = open();
  probe_->set_answer_cancel(false);  // the test sends the scheduler's answer itself
  generate(session, raw_request("r1", "Once"), 1);
  const auto sink = probe_->submit(0).sink;
  session.tell(CloseSession{});
  const auto cancel = probe_->cancel(0);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->reason, FinishReason::cancelled);

  // Closing, not yet closed: a new request is refused.
  generate(session, raw_request("r2", "Again"), 2);
  EXPECT_EQ(error_of(probe_->finished("r2")).code, ErrorCode::unavailable);
  EXPECT_EQ(session.state(), ActorState::running);

  sink(FakeScheduler::finished(1, FinishReason::cancelled, {}, 2, 0));
  EXPECT_EQ(done_of(probe_->finished("r1")).finish_reason, FinishReason::cancelled);
  EXPECT_TRUE(testing::eventually([&] { return session.state() == ActorState::stopped; }, kWait));
}

TEST_F(SessionActorTest, CloseSessionWhenIdleStopsAtOnce) {
  auto session = open();
  session.tell(CloseSession{});
  EXPECT_TRUE(testing::eventually([&] { return session.state() == ActorState::stopped; }, kWait));
  EXPECT_EQ(probe_->cancel_count(), 0u);
}

TEST_F(SessionActorTest, ASessionStoppedWithARequestRunningStillSendsItsDone) {
  auto session = open();
  probe_->set_answer_cancel(false);
  generate(session, raw_request("r1", "Once"), 1);
  probe_->submit(0);
  session.stop();
  EXPECT_EQ(done_of(probe_->finished("r1")).finish_reason, FinishReason::cancelled);
  const auto cancel = probe_->cancel(0);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ(cancel->sequence, 1u);
}

TEST_F(SessionActorTest, ASchedulerThatIsGoneMakesASubmitUnavailable) {
  auto session = open();
  scheduler_.stop();
  ASSERT_TRUE(testing::eventually([&] { return scheduler_.state() == ActorState::stopped; }, kWait));
  generate(session, raw_request("r1", "Once"), 1);
  EXPECT_EQ(error_of(probe_->finished("r1")).code, ErrorCode::unavailable);
  EXPECT_EQ(info(session).active_request, std::nullopt);
}

}  // namespace
}  // namespace loom::actors
