// The reply stream parser (reply_parser.hpp). The text not yet decided waits in buffer_; each step looks at
// it from the start and either decides a prefix (content, reasoning, a call group) or waits for more text.
// Every decision depends only on the text seen, never on where the pieces were split (the scanners of
// reply_scan.hpp never revise a verdict), so parse_reply() is simply the stream parser given everything at once with the end known.
#include "loom/compute/text/reply_parser.hpp"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>

#include "reply_scan.hpp"

namespace loom::compute {

using reply_detail::GroupScan;
using reply_detail::Scan;

std::string random_tool_call_id(ToolCallFormat format) {
  static constexpr std::string_view kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<std::size_t> pick(0, kAlnum.size() - 1);
  const bool mistral = format == ToolCallFormat::mistral;
  std::string id = mistral ? "" : "call_";
  for (int k = 0; k < (mistral ? 9 : 24); ++k) id += kAlnum[pick(rng)];
  return id;
}

ParsedReply parse_reply(const ReplyFormat& format, std::string_view text, const ReplyParseOptions& options) {
  ReplyStreamParser parser(format, options);
  parser.buffer_.assign(text);
  parser.run(true);
  return parser.result();
}

ReplyStreamParser::ReplyStreamParser(ReplyFormat format, ReplyParseOptions options)
    : format_(std::move(format)), options_(std::move(options)), memo_(std::make_unique<reply_detail::JsonMemo>()) {}

ReplyStreamParser::~ReplyStreamParser() = default;
ReplyStreamParser::ReplyStreamParser(ReplyStreamParser&&) noexcept = default;
ReplyStreamParser& ReplyStreamParser::operator=(ReplyStreamParser&&) noexcept = default;

std::vector<ReplyDelta> ReplyStreamParser::feed(std::string_view text_piece) {
  buffer_.append(text_piece);
  run(false);
  return std::exchange(out_, {});
}

std::vector<ReplyDelta> ReplyStreamParser::finish() {
  run(true);
  return std::exchange(out_, {});
}

void ReplyStreamParser::run(bool at_end) {
  while (step(at_end)) {
  }
}

bool ReplyStreamParser::step(bool at_end) {
  switch (mode_) {
    case Mode::start: return step_start(at_end);
    case Mode::reasoning: return step_reasoning(at_end);
    case Mode::content: return step_content(at_end);
    case Mode::call: return step_call(at_end);
    case Mode::harmony: return step_harmony(at_end);
  }
  return false;
}

bool ReplyStreamParser::triggers_active() const {
  return options_.tools_offered && !reply_detail::call_triggers(format_.tools).empty() &&
         (options_.parallel_tool_calls || groups_done_ == 0);
}

// The reply's beginning: a reasoning block, llama3's bare JSON call, or content.
bool ReplyStreamParser::step_start(bool at_end) {
  if (format_.tools == ToolCallFormat::gpt_oss) {
    mode_ = Mode::harmony;
    return true;
  }
  const bool reasoning = options_.extract_reasoning && !format_.reasoning_open.empty();
  if (reasoning && format_.starts_in_reasoning) {
    mode_ = Mode::reasoning;
    return true;
  }
  const std::size_t i = reply_detail::skip_space(buffer_, 0);
  if (i == buffer_.size() && !at_end) return false;
  if (reasoning) {
    const Scan m = reply_detail::match_literal(buffer_, i, format_.reasoning_open);
    if (m == Scan::incomplete && !at_end && i < buffer_.size()) return false;
    if (m == Scan::complete) {
      buffer_.erase(0, i + format_.reasoning_open.size());
      mode_ = Mode::reasoning;
      return true;
    }
  }
  mode_ = Mode::content;
  if (format_.tools == ToolCallFormat::llama3 && triggers_active() && i < buffer_.size() && buffer_[i] == '{') {
    buffer_.erase(0, i);
    mode_ = Mode::call;
  }
  return true;
}

namespace {

// Where a held-back tail starts: the earliest position whose rest is a proper prefix of one of `markers`.
std::size_t partial_marker_start(std::string_view s, const std::vector<std::string>& markers) {
  std::size_t start = s.size();
  for (const auto& m : markers) {
    for (std::size_t len = std::min(m.size() - 1, s.size()); len > 0; --len) {
      if (s.substr(s.size() - len) == std::string_view(m).substr(0, len)) {
        start = std::min(start, s.size() - len);
        break;
      }
    }
  }
  return start;
}

// Where the run of ASCII whitespace that ends s[0, end) starts.
std::size_t trailing_space_start(std::string_view s, std::size_t end) {
  while (end > 0 && (s[end - 1] == ' ' || s[end - 1] == '\n' || s[end - 1] == '\t' || s[end - 1] == '\r')) --end;
  return end;
}

}  // namespace

bool ReplyStreamParser::step_reasoning(bool at_end) {
  const std::size_t close = buffer_.find(format_.reasoning_close);
  if (close != std::string::npos) {
    emit_reasoning(std::string_view(buffer_).substr(0, close));
    buffer_.erase(0, close + format_.reasoning_close.size());
    mode_ = Mode::content;
    skip_space_ = true;
    return true;
  }
  std::size_t keep = buffer_.size();
  if (!at_end) {
    keep = partial_marker_start(buffer_, {format_.reasoning_close});
    keep = reply_detail::utf8_safe_end(buffer_, keep);
  }
  emit_reasoning(std::string_view(buffer_).substr(0, keep));
  buffer_.erase(0, keep);
  return false;
}

bool ReplyStreamParser::step_content(bool at_end) {
  if (skip_space_) {
    const std::size_t i = reply_detail::skip_space(buffer_, 0);
    buffer_.erase(0, i);
    if (buffer_.empty()) return false;
    skip_space_ = false;
  }
  if (after_call_ && !buffer_.empty()) {
    after_call_ = false;
    if (format_.tools == ToolCallFormat::llama3 && triggers_active() && buffer_[0] == '{') {
      mode_ = Mode::call;
      return true;
    }
  }
  std::size_t found = std::string::npos;
  std::size_t hold = buffer_.size();
  if (triggers_active()) {
    const auto& triggers = reply_detail::call_triggers(format_.tools);
    for (const auto& t : triggers) found = std::min(found, buffer_.find(t));
    // Whitespace right before a call is dropped (as after one): it waits until what follows is known.
    if (!at_end) hold = trailing_space_start(buffer_, partial_marker_start(buffer_, triggers));
  }
  if (found != std::string::npos && found <= hold) {
    const std::size_t space = trailing_space_start(buffer_, found);
    emit_content(std::string_view(buffer_).substr(0, space));
    space_before_call_.assign(buffer_, space, found - space);  // dropped if a call follows, content if not
    buffer_.erase(0, found);
    mode_ = Mode::call;
    return true;
  }
  if (!at_end) hold = reply_detail::utf8_safe_end(buffer_, hold);
  emit_content(std::string_view(buffer_).substr(0, hold));
  buffer_.erase(0, hold);
  return false;
}

// The call group at the buffer's start: streams what is safe to show, then ends as calls or as content.
bool ReplyStreamParser::step_call(bool at_end) {
  GroupScan g;
  {
    const reply_detail::MemoScope scope(*memo_);  // the group's values resume where the last scan stopped
    g = reply_detail::scan_group(format_.tools, buffer_);
  }
  if (g.status == Scan::incomplete && at_end) {
    g.status = g.closable ? Scan::complete : Scan::invalid;
    g.end = buffer_.size();
  }
  if (g.status == Scan::invalid) {
    // Not a call after all: its opening marker is content, and scanning resumes right after it.
    std::size_t marker = 1;  // llama3's bare '{'
    for (const auto& t : reply_detail::call_triggers(format_.tools)) {
      if (buffer_.starts_with(t)) marker = t.size();
    }
    if (group_announced_ > 0) ++groups_done_;
    group_announced_ = group_args_streamed_ = 0;
    memo_->clear();  // the buffer's start moves: positions change
    emit_content(std::exchange(space_before_call_, {}));
    emit_content(std::string_view(buffer_).substr(0, marker));
    buffer_.erase(0, marker);
    mode_ = Mode::content;
    return true;
  }
  for (std::size_t k = 0; k < g.calls.size(); ++k) {
    if (k + 1 < group_announced_) continue;  // already streamed whole
    if (k == group_announced_) announce_call(g.calls[k].name);
    emit_arguments(g.calls[k].arguments(buffer_).substr(group_args_streamed_));
  }
  if (g.status == Scan::incomplete) return false;
  ++groups_done_;
  group_announced_ = group_args_streamed_ = 0;
  memo_->clear();
  buffer_.erase(0, g.end);
  mode_ = Mode::content;
  skip_space_ = after_call_ = true;
  return true;
}

void ReplyStreamParser::emit_content(std::string_view text) {
  if (text.empty()) return;
  result_.content.append(text);
  if (out_.empty() || out_.back().tool_call || !out_.back().reasoning.empty()) out_.emplace_back();
  out_.back().content.append(text);
}

void ReplyStreamParser::emit_reasoning(std::string_view text) {
  if (text.empty()) return;
  result_.reasoning.append(text);
  if (out_.empty() || out_.back().tool_call || !out_.back().content.empty()) out_.emplace_back();
  out_.back().reasoning.append(text);
}

void ReplyStreamParser::announce_call(const std::string& name) {
  space_before_call_.clear();
  ToolCall call;
  call.id = options_.id_generator ? options_.id_generator(format_.tools) : random_tool_call_id(format_.tools);
  call.name = name;
  ToolCallDelta delta;
  delta.index = static_cast<int>(result_.tool_calls.size());
  delta.id = call.id;
  delta.name = name;
  result_.tool_calls.push_back(std::move(call));
  out_.push_back(ReplyDelta{{}, {}, std::move(delta)});
  ++group_announced_;
  group_args_streamed_ = 0;
}

void ReplyStreamParser::emit_arguments(std::string_view text) {
  if (text.empty()) return;
  group_args_streamed_ += text.size();
  result_.tool_calls.back().arguments.append(text);
  const int index = static_cast<int>(result_.tool_calls.size()) - 1;
  if (out_.empty() || !out_.back().tool_call || out_.back().tool_call->index != index) {
    out_.push_back(ReplyDelta{{}, {}, ToolCallDelta{index, std::nullopt, std::nullopt, {}}});
  }
  out_.back().tool_call->arguments.append(text);
}

}  // namespace loom::compute
