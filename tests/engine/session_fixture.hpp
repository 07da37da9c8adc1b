// The session actor under test against a fake scheduler that plays scripted tokens: the fixture shared by
// session_actor_test.cpp and session_chat_format_test.cpp (everything here is internal to each test file).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "loom/actors/engine/scheduler_actor.hpp"
#include "loom/actors/engine/session_actor.hpp"
#include "loom/cache/block_manager.hpp"
#include "loom/compute/model/gguf_file.hpp"
#include "loom/compute/text/chat_format.hpp"
#include "loom/compute/text/chat_template.hpp"
#include "loom/compute/text/tokenizer.hpp"
#include "test_files.hpp"
#include "test_support.hpp"

namespace loom::actors {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using compute::ChatTemplate;
using compute::ChatTurn;
using compute::ChatTurnRole;
using compute::testing::shared_path;
using proto::ChatMessage;
using proto::ChatRole;
using proto::DoneEvent;
using proto::ErrorCode;
using proto::ErrorEvent;
using proto::FinishReason;
using proto::ServerMessage;
using proto::TokenEvent;
using testing::RunningContext;
using Ids = std::vector<std::int32_t>;

constexpr auto kWait = 30s;  // generous: "arrives eventually", also under sanitizers
constexpr std::int32_t kEos = 2;

std::string model_path() { return shared_path("models/aidreams260K.gguf"); }

[[maybe_unused]] std::int32_t byte_token(unsigned char byte) { return 3 + byte; }  // aidreams260K's <0xNN> tokens

// How the fake scheduler answers a submit.
struct Script {
  enum class End { finish, reject, wait };
  Ids tokens;
  End end = End::finish;
  FinishReason reason = FinishReason::eos;  // for finish
  std::string error{};                      // for finish with error
  std::optional<float> logprob{};           // given to every token
  ErrorCode reject_code = ErrorCode::overloaded;
};

constexpr proto::Timings kTimings{.queue_ms = 1.5, .prefill_ms = 2.5, .decode_ms = 3.5, .first_token_ms = 4.5,
                                  .tokens_per_second = 5.5};

// What the actors did, for the test thread to wait on and inspect. A lock rather than a message: the test
// thread is not an actor and has to block until the actors have done something.
class Probe : public std::enable_shared_from_this<Probe> {
 public:
  // Keeps the probe alive: a session stopped at the end of a test still sends its done event.
  ClientSink sink() {
    return [self = shared_from_this()](ServerMessage message) { self->on_event(std::move(message)); };
  }

  void add_script(Script script) {
    std::lock_guard lock(mutex_);
    scripts_.push_back(std::move(script));
  }
  std::optional<Script> next_script() {
    std::lock_guard lock(mutex_);
    if (scripts_.empty()) return std::nullopt;
    auto script = std::move(scripts_.front());
    scripts_.pop_front();
    return script;
  }
  void set_answer_cancel(bool answer) {
    std::lock_guard lock(mutex_);
    answer_cancel_ = answer;
  }
  bool answer_cancel() const {
    std::lock_guard lock(mutex_);
    return answer_cancel_;
  }

  void on_submit(const SubmitSequence& submit) {
    std::lock_guard lock(mutex_);
    submits_.push_back(submit);
    changed_.notify_all();
  }
  void on_cancel(const CancelSequence& cancel) {
    std::lock_guard lock(mutex_);
    cancels_.push_back(cancel);
    changed_.notify_all();
  }
  void on_event(ServerMessage message) {
    std::lock_guard lock(mutex_);
    const std::string id = std::visit(
        [](const auto& m) -> std::string {
          if constexpr (requires { m.request_id; }) {
            return m.request_id;
          } else {
            return {};
          }
        },
        message);
    events_[id].push_back(std::move(message));
    changed_.notify_all();
  }

  // The n-th submit (0-based), once it has arrived.
  SubmitSequence submit(std::size_t n) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, kWait, [&] { return submits_.size() > n; })) {
      ADD_FAILURE() << "submit " << n << " never arrived";
      return {};
    }
    return submits_[n];
  }
  std::size_t submit_count() const {
    std::lock_guard lock(mutex_);
    return submits_.size();
  }
  std::optional<CancelSequence> cancel(std::size_t n) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, kWait, [&] { return cancels_.size() > n; })) return std::nullopt;
    return cancels_[n];
  }
  std::size_t cancel_count() const {
    std::lock_guard lock(mutex_);
    return cancels_.size();
  }

  // Every event of `request_id`, once its last one (done or error) has arrived.
  std::vector<ServerMessage> finished(const std::string& request_id) {
    std::unique_lock lock(mutex_);
    const bool ended = changed_.wait_for(lock, kWait, [&] {
      const auto& list = events_[request_id];
      return !list.empty() && !std::holds_alternative<TokenEvent>(list.back());
    });
    if (!ended) ADD_FAILURE() << "request " << request_id << " never got its done or error event";
    return events_[request_id];
  }
  // The events of `request_id` so far.
  std::vector<ServerMessage> events(const std::string& request_id) {
    std::lock_guard lock(mutex_);
    return events_[request_id];
  }
  void wait_for_events(const std::string& request_id, std::size_t count) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, kWait, [&] { return events_[request_id].size() >= count; })) {
      ADD_FAILURE() << "request " << request_id << " never got " << count << " events";
    }
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Script> scripts_;
  bool answer_cancel_ = true;
  std::vector<SubmitSequence> submits_;
  std::vector<CancelSequence> cancels_;
  std::map<std::string, std::vector<ServerMessage>> events_;
};

// Speaks SchedulerProtocol: records submits and cancels; plays the next script for a submit (or none, and
// the test drives the sink); answers a cancel of a live sequence with SequenceFinished of that reason.
class FakeScheduler : public Actor<FakeScheduler, SchedulerProtocol> {
 public:
  explicit FakeScheduler(std::shared_ptr<Probe> probe) : probe_(std::move(probe)) {}

  void on(SubmitSequence m) {
    probe_->on_submit(m);
    auto script = probe_->next_script();
    if (!script) {
      live_[m.sequence] = {m.sink, static_cast<std::int32_t>(m.prompt.size()), 0};
      return;
    }
    for (std::size_t i = 0; i < script->tokens.size(); ++i) {
      m.sink(SequenceToken{m.sequence, script->tokens[i], static_cast<std::int32_t>(i), script->logprob, {}});
    }
    const auto prompt = static_cast<std::int32_t>(m.prompt.size());
    const auto generated = static_cast<std::int32_t>(script->tokens.size());
    switch (script->end) {
      case Script::End::finish:
        m.sink(finished(m.sequence, script->reason, script->error, prompt, generated + 1));
        break;
      case Script::End::reject:
        m.sink(SequenceRejected{m.sequence, script->reject_code, "the waiting queue is full"});
        break;
      case Script::End::wait:
        live_[m.sequence] = {m.sink, prompt, generated};
        break;
    }
  }
  void on(CancelSequence m) {
    probe_->on_cancel(m);
    auto it = live_.find(m.sequence);
    if (it == live_.end() || !probe_->answer_cancel()) return;
    it->second.sink(finished(m.sequence, m.reason, {}, it->second.prompt, it->second.generated));
    live_.erase(it);
  }
  void on(ThermalStateChanged) {}
  void on(DrainScheduler m) { m.reply(true); }
  void on(GetSchedulerStats m) { m.reply(SchedulerStats{}); }

  static SequenceFinished finished(cache::SequenceId sequence, FinishReason reason, std::string error,
                                   std::int32_t prompt, std::int32_t completion) {
    SequenceFinished f;
    f.sequence = sequence;
    f.reason = reason;
    f.error = std::move(error);
    f.prompt_tokens = prompt;
    f.cached_tokens = 3;
    f.completion_tokens = completion;
    f.timings = kTimings;
    return f;
  }

 private:
  struct Live {
    SequenceSink sink;
    std::int32_t prompt = 0;
    std::int32_t generated = 0;
  };
  std::shared_ptr<Probe> probe_;
  std::unordered_map<cache::SequenceId, Live> live_;
};

[[maybe_unused]] proto::GenerateRequest raw_request(std::string id, std::string prompt) {
  proto::GenerateRequest r;
  r.id = std::move(id);
  r.input = std::move(prompt);
  return r;
}

[[maybe_unused]] proto::GenerateRequest chat_request(std::string id, std::vector<ChatMessage> messages) {
  proto::GenerateRequest r;
  r.id = std::move(id);
  r.input = std::move(messages);
  return r;
}

std::vector<TokenEvent> tokens_of(const std::vector<ServerMessage>& events) {
  std::vector<TokenEvent> tokens;
  for (const auto& e : events) {
    if (const auto* t = std::get_if<TokenEvent>(&e)) tokens.push_back(*t);
  }
  return tokens;
}

std::string text_of(const std::vector<ServerMessage>& events) {
  std::string text;
  for (const auto& t : tokens_of(events)) text += t.text;
  return text;
}

Ids ids_of(const std::vector<TokenEvent>& tokens) {
  Ids ids;
  for (const auto& t : tokens) ids.push_back(t.token);
  return ids;
}

// The done event, which must be the last event and the only one of its kind.
DoneEvent done_of(const std::vector<ServerMessage>& events) {
  std::size_t count = 0;
  for (const auto& e : events) count += std::holds_alternative<DoneEvent>(e) ? 1 : 0;
  EXPECT_EQ(count, 1u) << "exactly one done event";
  if (events.empty() || !std::holds_alternative<DoneEvent>(events.back())) {
    ADD_FAILURE() << "the last event is not a done event";
    return {};
  }
  return std::get<DoneEvent>(events.back());
}

// The events must be exactly one error event.
ErrorEvent error_of(const std::vector<ServerMessage>& events) {
  if (events.size() != 1 || !std::holds_alternative<ErrorEvent>(events.front())) {
    ADD_FAILURE() << "expected exactly one event, an error; got " << events.size() << " events";
    return {};
  }
  return std::get<ErrorEvent>(events.front());
}

[[maybe_unused]] bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

class SessionActorTest : public ::testing::Test {
 protected:
  using Session = ActorHandle<SessionProtocol>;

  void SetUp() override {
    REQUIRE_SHARED_FILE(model_path());
    vocabulary_ = compute::Vocabulary::from_gguf(compute::GgufFile::open(model_path()));
    tokenizer_ = std::make_shared<const compute::Tokenizer>(vocabulary_);
    scheduler_ = spawn<FakeScheduler>(ctx_.executor(), {.name = "fake_scheduler"}, probe_);
  }

  // The fake scheduler has no context of its own: the default is roomy (this vocabulary spells chatml's
  // markers in many tokens), the trimming tests choose theirs.
  std::shared_ptr<const SessionContext> context(std::int64_t context_length = 1024,
                                                std::optional<ChatTemplate> chat_template = ChatTemplate::chatml,
                                                std::shared_ptr<const compute::Tokenizer> tokenizer = nullptr) {
    auto c = std::make_shared<SessionContext>();
    c->tokenizer = tokenizer ? std::move(tokenizer) : tokenizer_;
    if (chat_template) c->chat_format = compute::ChatFormat::from_builtin(*chat_template);
    c->context_length = context_length;
    c->scheduler = scheduler_.address();
    return c;
  }

  Session open(std::optional<std::string> system_prompt = std::nullopt,
               std::shared_ptr<const SessionContext> ctx = nullptr) {
    SessionOptions options{"s1", std::move(system_prompt)};
    return spawn<SessionActor>(ctx_.executor(), {.name = "session"}, ctx ? std::move(ctx) : context(), std::move(options));
  }

  void generate(const Session& session, proto::GenerateRequest request, cache::SequenceId sequence) {
    SessionGenerate m;
    m.request = std::move(request);
    m.sequence = sequence;
    m.sink = probe_->sink();
    ASSERT_TRUE(session.tell(std::move(m)));
  }

  static SessionInfo info(const Session& session) {
    return session.address().ask(GetSessionInfo{}, kWait, asio::use_future).get();
  }

  Ids encode(const std::string& text) const { return tokenizer_->encode(text, {.add_special = false}); }
  // The token whose text is exactly `piece`.
  std::int32_t token_for(const std::string& piece) const {
    for (std::int32_t id = 0; id < vocabulary_.size(); ++id) {
      if (tokenizer_->piece(id) == piece) return id;
    }
    ADD_FAILURE() << "no token is '" << piece << "'";
    return 0;
  }
  Ids chat_prompt(const std::vector<ChatTurn>& turns) const {
    return compute::encode_prompt(*tokenizer_, compute::render_chat(ChatTemplate::chatml, turns, true), true);
  }

  // A reply: its tokens are played by the fake and it ends with eos.
  void reply_with(const std::string& text) { probe_->add_script({.tokens = encode(text)}); }

  RunningContext ctx_{2};
  std::shared_ptr<Probe> probe_ = std::make_shared<Probe>();
  compute::Vocabulary vocabulary_;
  std::shared_ptr<const compute::Tokenizer> tokenizer_;
  ActorHandle<SchedulerProtocol> scheduler_;
};

}  // namespace
}  // namespace loom::actors
