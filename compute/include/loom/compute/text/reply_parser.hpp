// Reply parsing: splits a model's reply into content, reasoning and tool calls, for a whole text
// (parse_reply) or as it streams (ReplyStreamParser), by the family's ReplyFormat (reply_format.hpp).
//
// Rules, the same for both (parse_reply() is the stream parser given the whole text as its last piece):
// - Calls are recognized only when tools were offered. Reasoning is taken out only when extract_reasoning is
//   set and the reply starts with the opener (after whitespace) or starts_in_reasoning; an unclosed block is
//   all reasoning. Whitespace right after a reasoning block or a call, and right before a call, is dropped.
// - Text that looks like a call but does not parse (bad JSON, unknown keys, wrong markers) stays content,
//   unchanged; recognition resumes right after its opening marker.
// - With parallel_tool_calls off, nothing after the first call group is recognized (it is content); a group
//   that lists several calls at once (mistral's, command_r's and granite's JSON lists) is kept whole.
// - At the end (finish()), a call whose JSON is complete but whose closing marker never came is a call;
//   anything else unfinished is content.
// - Arguments are the JSON text of the arguments object as the model wrote it; when the model wrote a JSON
//   string holding the object, the string is decoded. Ids come from options.id_generator.
// - gpt_oss: the reply is harmony messages; the analysis channel is reasoning (with extract_reasoning off,
//   its text joins the content), a message to functions.NAME is a call, other channels are content, and
//   the headers and end markers are dropped. A reply that does not start with a header is all content.
//
// Not recognized (left as content): functionary's and Llama's built-in tool calls (<|python_tag|> followed
// by code rather than JSON), pythonic calls ([f(a=1)]), Command R's <|START_RESPONSE|> and granite's
// <response> wrappers around the answer. Cost: linear in the text; a call's JSON values are read once, as
// they arrive (a resumable scanner keeps its place between pieces): a 20 KB call fed 4 bytes at a time
// takes about 7 ms.
//
// Streaming: text that could still be a marker is held back; a call is announced (index, id, name) once its
// name is complete and its arguments have begun as a JSON object, then its argument text streams while it
// stays a valid JSON prefix. String-encoded arguments come in one piece when complete. Concatenating the
// deltas gives exactly parse_reply()'s result, however the text was split, with ONE exception: a call that
// breaks after it was announced (the model stops mid-arguments, or writes invalid JSON or wrong markers
// after valid arguments began). Deltas cannot be taken back, so the stream keeps that call with the argument
// text already streamed (possibly not valid JSON), and then treats the group as any text that is not a call:
// its whole text, from the opening marker, is content (so the streamed argument text appears twice);
// parse_reply() of the whole text, which sees the break before announcing anything, gives only the content.
// result() always equals the deltas.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/reply_format.hpp"

namespace loom::compute {

namespace reply_detail {
class JsonMemo;
}

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
  friend bool operator==(const ToolCall&, const ToolCall&) = default;
};

struct ParsedReply {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  friend bool operator==(const ParsedReply&, const ParsedReply&) = default;
};

// "call_" + 24 random alphanumerics; for mistral 9 alphanumerics (its templates refuse any other id).
std::string random_tool_call_id(ToolCallFormat format);

struct ReplyParseOptions {
  bool tools_offered = false;
  bool extract_reasoning = true;     // false: OpenAI's reasoning_format "none", reasoning stays in content
  bool parallel_tool_calls = true;
  // Makes each call's id; random_tool_call_id when empty. Tests inject a counter.
  std::function<std::string(ToolCallFormat)> id_generator;
};

ParsedReply parse_reply(const ReplyFormat& format, std::string_view text, const ReplyParseOptions& options);

// One piece of a call, as OpenAI streams them: the first carries index, id and name, later ones argument text.
struct ToolCallDelta {
  int index = 0;
  std::optional<std::string> id;
  std::optional<std::string> name;
  std::string arguments;
  friend bool operator==(const ToolCallDelta&, const ToolCallDelta&) = default;
};

// One of content, reasoning or a call piece (never two at once).
struct ReplyDelta {
  std::string content;
  std::string reasoning;
  std::optional<ToolCallDelta> tool_call;
  friend bool operator==(const ReplyDelta&, const ReplyDelta&) = default;
};

class ReplyStreamParser {
 public:
  ReplyStreamParser(ReplyFormat format, ReplyParseOptions options);
  ~ReplyStreamParser();
  ReplyStreamParser(ReplyStreamParser&&) noexcept;
  ReplyStreamParser& operator=(ReplyStreamParser&&) noexcept;

  // Takes the next piece of generated text; returns what can be shown now.
  std::vector<ReplyDelta> feed(std::string_view text_piece);
  // The end of generation (EOS, max_tokens, a stop string): decides everything still held back. Call it
  // once; feed() after it is not meant to be used.
  std::vector<ReplyDelta> finish();
  // Whether text fed so far is still undecided (finish() would turn it into deltas): the session keeps a
  // token back meanwhile, to carry what the end releases.
  bool holding() const noexcept { return !buffer_.empty(); }
  // Everything returned so far, assembled.
  ParsedReply result() const { return result_; }

 private:
  // Decides the whole text with the end known, so that nothing is announced before it is checked.
  friend ParsedReply parse_reply(const ReplyFormat&, std::string_view, const ReplyParseOptions&);

  enum class Mode { start, content, reasoning, call, harmony };
  void run(bool at_end);
  bool step(bool at_end);
  bool step_start(bool at_end);
  bool step_reasoning(bool at_end);
  bool step_content(bool at_end);
  bool step_call(bool at_end);
  bool step_harmony(bool at_end);
  bool step_harmony_call(bool at_end);
  std::size_t partial_end_marker(bool plain) const;
  void emit_content(std::string_view text);
  void emit_reasoning(std::string_view text);
  void announce_call(const std::string& name);
  void emit_arguments(std::string_view text);
  bool triggers_active() const;

  ReplyFormat format_;
  ReplyParseOptions options_;
  Mode mode_ = Mode::start;
  std::string buffer_;           // text not yet decided
  bool skip_space_ = false;      // drop whitespace before the next content
  bool after_call_ = false;      // a call group just ended (llama3 allows a bare '{' call here)
  std::string space_before_call_;  // whitespace before an undecided call: dropped for a call, else content
  std::size_t groups_done_ = 0;  // call groups completed
  // The group being parsed: calls announced in it, argument bytes streamed for its last call.
  std::size_t group_announced_ = 0;
  std::size_t group_args_streamed_ = 0;
  // gpt_oss: the channel of the message being read and whether it is a call.
  std::string harmony_header_;
  int harmony_state_ = 0;
  std::vector<ReplyDelta> out_;
  ParsedReply result_;
  // The open call group's JSON values, so that each piece is read once (reply_scan.hpp).
  std::unique_ptr<reply_detail::JsonMemo> memo_;
};

}  // namespace loom::compute
