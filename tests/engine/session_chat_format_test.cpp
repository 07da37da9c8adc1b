// The session with a model's own Jinja chat template: what reaches the template (messages, tools,
// chat_template_kwargs, the history with its tool calls), the template's own refusals, replies split into
// content, reasoning and tool calls (token events and the done event), and tool_choice. Templates are the
// real ones in ../shared/templates (Qwen 2.5 for Hermes-style calls, DeepSeek R1 for reasoning), or a few
// lines written here; the expected prompts are rendered from messages written out in the test.
#include <fstream>
#include <sstream>

#include "loom/compute/grammar/output_constraint.hpp"
#include "session_fixture.hpp"

namespace loom::actors {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  const std::string path = shared_path("templates/templates/" + name + ".jinja");
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "missing shared test file: " << path << " (../shared must sit beside the checkout)";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* const kQwen = "Qwen-Qwen2.5-7B-Instruct";
const char* const kDeepSeek = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B";

proto::ToolDefinition weather_tool() {
  proto::ToolDefinition tool;
  tool.name = "get_weather";
  tool.description = "The weather in a city";
  tool.parameters = R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})";
  return tool;
}

// The same tool as the template must see it, written out here (OpenAI's shape, the client's key order).
ordered_json weather_tool_json() {
  return ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
}

ChatMessage message(ChatRole role, std::string content) {
  ChatMessage m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

class SessionChatFormatTest : public SessionActorTest {
 protected:
  std::shared_ptr<const compute::ChatFormat> format_of(const std::string& source) const {
    return compute::ChatFormat::from_jinja(source, "the test template", "<s>", "</s>");
  }
  std::shared_ptr<const SessionContext> jinja_context(const std::string& source) {
    auto c = std::make_shared<SessionContext>(*context(4096));
    c->chat_format = format_of(source);
    return c;
  }
  // The prompt the session must submit for `messages` (JSON written in the test) through `source`.
  Ids expected_prompt(const std::string& source, ordered_json messages, ordered_json tools = nullptr,
                      ordered_json kwargs = nullptr) const {
    compute::ChatInput input;
    input.messages = std::move(messages);
    input.tools = std::move(tools);
    input.extra = std::move(kwargs);
    std::string text = format_of(source)->render(input);
    if (text.starts_with("<s>")) text.erase(0, 3);  // the tokenizer adds this vocabulary's BOS itself
    return compute::encode_prompt(*tokenizer_, text, true);
  }
  // The text a scripted reply shows: this SentencePiece vocabulary puts a space before the first word.
  std::string shown(const std::string& reply) const { return tokenizer_->decode(encode(reply)); }
  // The arguments and names of the calls as the token events streamed them.
  static std::vector<std::pair<std::string, std::string>> streamed_calls(const std::vector<ServerMessage>& events) {
    std::vector<std::pair<std::string, std::string>> calls;
    for (const auto& event : tokens_of(events)) {
      for (const auto& delta : event.tool_calls) {
        if (delta.index == static_cast<std::int32_t>(calls.size())) {
          EXPECT_TRUE(delta.id && delta.name) << "a call's first delta carries its id and name";
          calls.emplace_back(delta.name.value_or(""), "");
        }
        EXPECT_LT(delta.index, static_cast<std::int32_t>(calls.size()));
        if (delta.index < static_cast<std::int32_t>(calls.size())) calls[delta.index].second += delta.arguments;
      }
    }
    return calls;
  }
};

TEST_F(SessionChatFormatTest, TheModelsTemplateGetsTheMessagesAndToolsAsTransformersPassesThem) {
  const std::string source = read_template(kQwen);
  auto session = open(std::nullopt, jinja_context(source));
  auto request = chat_request("c1", {message(ChatRole::system, "Be brief."), message(ChatRole::user, "Weather?")});
  request.tools = {weather_tool()};
  reply_with("Sunny.");
  generate(session, request, 1);
  probe_->finished("c1");
  const auto messages = ordered_json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}])");
  EXPECT_EQ(probe_->submit(0).prompt, expected_prompt(source, messages, weather_tool_json()));
}

TEST_F(SessionChatFormatTest, AToolCallReplyIsStreamedAsCallPiecesAndEndsWithFinishReasonToolCalls) {
  const std::string source = read_template(kQwen);
  auto session = open(std::nullopt, jinja_context(source));
  auto request = chat_request("c1", {message(ChatRole::user, "Weather in Paris?")});
  request.tools = {weather_tool()};
  const std::string reply = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const Ids reply_tokens = encode(reply);
  probe_->add_script({.tokens = reply_tokens});
  generate(session, request, 1);
  const auto events = probe_->finished("c1");

  EXPECT_EQ(ids_of(tokens_of(events)), reply_tokens) << "every token has its event, in order";
  EXPECT_EQ(text_of(events), "") << "a call is not content (nor the space this vocabulary writes before it)";
  const auto calls = streamed_calls(events);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].first, "get_weather");
  EXPECT_EQ(calls[0].second, R"({"city": "Paris"})");
  const auto done = done_of(events);
  EXPECT_EQ(done.finish_reason, FinishReason::tool_calls);
  ASSERT_EQ(done.tool_calls.size(), 1u);
  EXPECT_EQ(done.tool_calls[0].name, "get_weather");
  EXPECT_EQ(done.tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_TRUE(done.tool_calls[0].id.starts_with("call_")) << done.tool_calls[0].id;

  // The next turn sends the tool's result; the history holds the call, which the template shows.
  ChatMessage result = message(ChatRole::tool, "{\"temperature\": 21}");
  result.tool_call_id = done.tool_calls[0].id;
  reply_with("It is 21 degrees.");
  auto next = chat_request("c2", {result});
  next.tools = {weather_tool()};  // a client offers the tools with every request
  generate(session, next, 2);
  probe_->finished("c2");
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": ""}])");
  messages[1]["tool_calls"][0]["id"] = done.tool_calls[0].id;
  messages[2]["tool_call_id"] = done.tool_calls[0].id;
  EXPECT_EQ(probe_->submit(1).prompt, expected_prompt(source, messages, weather_tool_json()));
}

TEST_F(SessionChatFormatTest, TextThatOnlyLooksLikeACallStaysContent) {
  auto session = open(std::nullopt, jinja_context(read_template(kQwen)));
  auto request = chat_request("c1", {message(ChatRole::user, "Hi")});
  request.tools = {weather_tool()};
  reply_with("<tool_call>not json</tool_call> ok");
  generate(session, request, 1);
  const auto events = probe_->finished("c1");
  EXPECT_EQ(text_of(events), shown("<tool_call>not json</tool_call> ok"));
  EXPECT_TRUE(streamed_calls(events).empty());
  EXPECT_EQ(done_of(events).finish_reason, FinishReason::eos);
}

TEST_F(SessionChatFormatTest, WithoutToolsACallShapedReplyIsContent) {
  auto session = open(std::nullopt, jinja_context(read_template(kQwen)));
  const std::string reply = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  reply_with(reply);
  generate(session, chat_request("c1", {message(ChatRole::user, "Hi")}), 1);
  const auto events = probe_->finished("c1");
  EXPECT_EQ(text_of(events), shown(reply));
  EXPECT_TRUE(done_of(events).tool_calls.empty());
}

TEST_F(SessionChatFormatTest, ReasoningAfterAPromptThatOpensThinkIsReasoningContent) {
  const std::string source = read_template(kDeepSeek);
  auto session = open(std::nullopt, jinja_context(source));
  reply_with("Two and two.\n</think>\n\nFour.");
  generate(session, chat_request("c1", {message(ChatRole::user, "2+2?")}), 1);
  const auto events = probe_->finished("c1");
  std::string reasoning;
  for (const auto& t : tokens_of(events)) reasoning += t.reasoning;
  EXPECT_EQ(reasoning, shown("Two and two.\n"));
  EXPECT_EQ(text_of(events), "Four.");
  EXPECT_EQ(done_of(events).finish_reason, FinishReason::eos);
  const auto prompt = probe_->submit(0).prompt;
  ASSERT_GE(prompt.size(), 2u);
  EXPECT_EQ(prompt[0], vocabulary_.bos);
  EXPECT_NE(prompt[1], vocabulary_.bos) << "the template's BOS text and the tokenizer's BOS are one token";
}

TEST_F(SessionChatFormatTest, ReasoningFormatNoneKeepsTheReasoningInTheContent) {
  auto session = open(std::nullopt, jinja_context(read_template(kDeepSeek)));
  auto request = chat_request("c1", {message(ChatRole::user, "2+2?")});
  request.reasoning_format = proto::ReasoningFormat::none;
  reply_with("Two and two.\n</think>\n\nFour.");
  generate(session, request, 1);
  const auto events = probe_->finished("c1");
  EXPECT_EQ(text_of(events), shown("Two and two.\n</think>\n\nFour."));
  for (const auto& t : tokens_of(events)) EXPECT_EQ(t.reasoning, "");
}

TEST_F(SessionChatFormatTest, ChatTemplateKwargsBecomeTemplateVariables) {
  const std::string source = "{{ greeting }}{% for m in messages %}|{{ m.content }}{% endfor %}";
  auto session = open(std::nullopt, jinja_context(source));
  auto request = chat_request("c1", {message(ChatRole::user, "Hi")});
  request.chat_template_kwargs = R"({"greeting": "Hey", "messages": "ignored: the conversation wins"})";
  reply_with("Yo.");
  generate(session, request, 1);
  probe_->finished("c1");
  EXPECT_EQ(probe_->submit(0).prompt, compute::encode_prompt(*tokenizer_, "Hey|Hi", true));
}

TEST_F(SessionChatFormatTest, ATemplatesRaiseExceptionIsTheClientsErrorWithItsMessage) {
  auto session = open(std::nullopt, jinja_context("{{ raise_exception('Conversation roles must alternate') }}"));
  generate(session, chat_request("c1", {message(ChatRole::user, "Hi")}), 1);
  const auto error = error_of(probe_->finished("c1"));
  EXPECT_EQ(error.code, ErrorCode::invalid_request);
  EXPECT_EQ(error.field, "messages");
  EXPECT_EQ(error.message, "Conversation roles must alternate");
  EXPECT_EQ(probe_->submit_count(), 0u);
}

TEST_F(SessionChatFormatTest, ToolChoiceRequiredConstrainsDecodingToACallOfAnOfferedTool) {
  auto session = open(std::nullopt, jinja_context(read_template(kQwen)));
  auto request = chat_request("c1", {message(ChatRole::user, "Weather?")});
  request.tools = {weather_tool()};
  request.tool_choice.mode = proto::ToolChoice::Mode::required;
  reply_with("x");
  generate(session, request, 1);
  probe_->finished("c1");
  const auto submit = probe_->submit(0);
  ASSERT_TRUE(submit.params.constraint.has_value());
  EXPECT_EQ(submit.params.constraint->kind, proto::OutputConstraint::Kind::grammar);
  EXPECT_NE(submit.params.constraint->text.find("get_weather"), std::string::npos);
  EXPECT_NO_THROW(compute::grammar::compile_constraint(*submit.params.constraint));
}

TEST_F(SessionChatFormatTest, ToolChoiceNoneHidesTheToolsFromTheTemplateAndParsesNoCalls) {
  const std::string source = read_template(kQwen);
  auto session = open(std::nullopt, jinja_context(source));
  auto request = chat_request("c1", {message(ChatRole::user, "Weather?")});
  request.tools = {weather_tool()};
  request.tool_choice.mode = proto::ToolChoice::Mode::none;
  const std::string reply = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
  reply_with(reply);
  generate(session, request, 1);
  const auto events = probe_->finished("c1");
  EXPECT_EQ(probe_->submit(0).prompt,
            expected_prompt(source, ordered_json::parse(R"([{"role": "user", "content": "Weather?"}])")));
  EXPECT_EQ(text_of(events), shown(reply));
  EXPECT_FALSE(probe_->submit(0).params.constraint.has_value());
}

TEST_F(SessionChatFormatTest, ForcingACallWithATemplateWithoutCallSyntaxIsUnsupported) {
  auto session = open(std::nullopt, jinja_context("{% for m in messages %}{{ m.content }}{% endfor %}"));
  auto request = chat_request("c1", {message(ChatRole::user, "Weather?")});
  request.tools = {weather_tool()};
  request.tool_choice.mode = proto::ToolChoice::Mode::required;
  generate(session, request, 1);
  const auto error = error_of(probe_->finished("c1"));
  EXPECT_EQ(error.code, ErrorCode::unsupported);
  EXPECT_EQ(error.field, "tool_choice");
}

}  // namespace
}  // namespace loom::actors
