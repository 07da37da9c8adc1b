// gpt-oss replies (OpenAI's harmony format) in the reply stream parser: a reply is a run of messages, each
// a header then a body, `[<|start|>assistant]<|channel|>CHANNEL[ to=functions.NAME][ <|constrain|>json]
// <|message|>BODY<|end|>` (the recipient may also stand before <|channel|>; a call's body ends with
// <|call|>, the last message's with <|return|> or the end of text). The analysis channel is reasoning, a
// message to functions.NAME is a call whose body is the arguments, other channels are content. A reply
// that does not start with a header is plain content.
#include "loom/compute/text/reply_parser.hpp"
#include <algorithm>

#include "reply_scan.hpp"

namespace loom::compute {
namespace {

using reply_detail::Scan;

enum State { kHeader = 0, kContent = 1, kReasoning = 2, kCall = 3, kPlain = 4 };

constexpr std::string_view kMessage = "<|message|>";
const std::vector<std::string> kHeaderStarts{"<|channel|>", "<|start|>", " to=", "to="};
const std::vector<std::string> kBodyEnds{"<|end|>", "<|call|>", "<|return|>"};
constexpr std::size_t kMaxHeader = 512;

// The recipient's function name in a header ("... to=functions.get_weather <|constrain|>json"), or "".
std::string header_function(std::string_view header) {
  const std::size_t at = header.find("to=functions.");
  if (at == std::string_view::npos) return {};
  std::size_t end = at + 13;
  while (end < header.size() && header[end] != ' ' && header[end] != '<') ++end;
  return std::string(header.substr(at + 13, end - at - 13));
}

std::string header_channel(std::string_view header) {
  const std::size_t at = header.find("<|channel|>");
  if (at == std::string_view::npos) return {};
  std::size_t end = at + 11;
  while (end < header.size() && header[end] != ' ' && header[end] != '<') ++end;
  return std::string(header.substr(at + 11, end - at - 11));
}

std::size_t earliest(std::string_view s, const std::vector<std::string>& markers, std::size_t& length) {
  std::size_t best = std::string_view::npos;
  for (const auto& m : markers) {
    const std::size_t at = s.find(m);
    if (at < best) best = at, length = m.size();
  }
  return best;
}

bool starts_as_header(std::string_view s) {
  for (const auto& h : kHeaderStarts) {
    if (reply_detail::match_literal(s, 0, h) != Scan::invalid) return true;
  }
  return false;
}

}  // namespace

bool ReplyStreamParser::step_harmony(bool at_end) {
  if (harmony_state_ == kHeader) {
    if (buffer_.empty()) return false;
    const std::size_t at = buffer_.find(kMessage);
    // A header is at most kMaxHeader bytes: decided the same whether its end is seen at once or in pieces
    // (a marker could still begin within the limit until the buffer is longer than the limit and a marker).
    const bool too_long = at == std::string::npos ? buffer_.size() >= kMaxHeader + kMessage.size() : at > kMaxHeader;
    if (!starts_as_header(buffer_) || too_long || (at == std::string::npos && at_end)) {
      harmony_state_ = kPlain;
      return true;
    }
    if (at == std::string::npos) return false;
    const std::string_view header = std::string_view(buffer_).substr(0, at);
    const std::string function = header_function(header);
    const bool calls_allowed = options_.tools_offered && (options_.parallel_tool_calls || groups_done_ == 0);
    if (!function.empty() && calls_allowed) {
      harmony_header_ = function;
      harmony_state_ = kCall;
    } else {
      const bool analysis = header_channel(header) == "analysis" && options_.extract_reasoning;
      harmony_state_ = analysis ? kReasoning : kContent;
    }
    buffer_.erase(0, at + kMessage.size());
    return true;
  }
  if (harmony_state_ == kCall) return step_harmony_call(at_end);
  // A body: everything up to its end marker (plain content: to the end of text).
  std::size_t marker = 0;
  std::size_t end = harmony_state_ == kPlain ? std::string::npos : earliest(buffer_, kBodyEnds, marker);
  std::size_t keep = end;
  if (end == std::string::npos) {
    keep = buffer_.size();
    if (!at_end) keep = reply_detail::utf8_safe_end(buffer_, partial_end_marker(harmony_state_ == kPlain));
  }
  const std::string_view body = std::string_view(buffer_).substr(0, keep);
  harmony_state_ == kReasoning ? emit_reasoning(body) : emit_content(body);
  buffer_.erase(0, keep);
  if (end == std::string::npos) return false;
  buffer_.erase(0, marker);
  harmony_state_ = kHeader;
  return true;
}

std::size_t ReplyStreamParser::partial_end_marker(bool plain) const {
  if (plain) return buffer_.size();
  std::size_t start = buffer_.size();
  for (const auto& m : kBodyEnds) {
    for (std::size_t len = std::min(m.size() - 1, buffer_.size()); len > 0; --len) {
      if (std::string_view(buffer_).substr(buffer_.size() - len) == std::string_view(m).substr(0, len)) {
        start = std::min(start, buffer_.size() - len);
        break;
      }
    }
  }
  return start;
}

// A call's body: its arguments object streams as it comes; then <|call|> (or <|end|>) ends it.
bool ReplyStreamParser::step_harmony_call(bool at_end) {
  const std::size_t begin = reply_detail::skip_space(buffer_, 0);
  reply_detail::GroupScan g;
  std::size_t i = 0;
  Scan s = Scan::incomplete;
  if (begin < buffer_.size()) {
    const reply_detail::MemoScope scope(*memo_);
    const reply_detail::JsonScan v = reply_detail::scan_buffer_value(buffer_, begin);
    s = buffer_[begin] == '{' ? v.status : Scan::invalid;
    i = v.end;
    if (s != Scan::invalid) {
      const std::size_t stop = s == Scan::complete ? v.end : reply_detail::utf8_safe_end(buffer_, buffer_.size());
      g.calls.push_back({harmony_header_, begin, stop, {}, s == Scan::complete, true});
    }
  }
  std::size_t close_end = 0;
  if (s == Scan::complete) {
    i = reply_detail::skip_space(buffer_, i);
    s = Scan::invalid;
    for (std::string_view m : {"<|call|>", "<|end|>"}) {
      const Scan c = reply_detail::match_literal(buffer_, i, m);
      if (c == Scan::complete) s = c, close_end = i + m.size();
      if (c == Scan::incomplete && s == Scan::invalid) s = c;
    }
    if (s == Scan::incomplete && at_end) s = Scan::complete, close_end = buffer_.size();
  }
  if (s == Scan::incomplete && at_end) s = Scan::invalid;
  if (s == Scan::invalid) {  // not a call: the body is content
    memo_->clear();
    if (group_announced_ > 0) ++groups_done_;
    group_announced_ = group_args_streamed_ = 0;
    harmony_state_ = kContent;
    return true;
  }
  if (!g.calls.empty()) {
    if (group_announced_ == 0) announce_call(g.calls[0].name);
    emit_arguments(g.calls[0].arguments(buffer_).substr(group_args_streamed_));
  }
  if (s == Scan::incomplete) return false;
  memo_->clear();
  ++groups_done_;
  group_announced_ = group_args_streamed_ = 0;
  buffer_.erase(0, close_end);
  harmony_state_ = kHeader;
  return true;
}

}  // namespace loom::compute
