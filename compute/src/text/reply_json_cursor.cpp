// The resumable JSON scanner and the scan memo of reply_scan.hpp. The stream parser rescans the open call
// group on every piece; without the memo a call would cost time quadratic in its length, as every scan
// re-read the arguments from their start. JsonCursor keeps the scanner's whole state at the end of the text
// it has seen (open containers, what comes next, the token in progress), so a later scan of a longer text
// reads only the new bytes. It gives exactly scan_json_value()'s verdicts (a test checks every prefix).
#include "reply_scan.hpp"

namespace loom::compute::reply_detail {
namespace {

constexpr std::size_t kMaxOpen = 129;  // as scan_json_value: a 130th nested container is refused


// Number phases: which parts were read, and whether the number may end here.
enum NumberPhase : int { kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };
bool number_may_end(int phase) { return phase == kZero || phase == kInt || phase == kFrac || phase == kExpDigits; }

// The next phase after `c`, or -1 when `c` does not continue the number.
int number_next(int phase, char c) {
  const bool d = is_json_digit(c);
  switch (phase) {
    case kMinus: return c == '0' ? kZero : d ? kInt : -1;
    case kZero: return c == '.' ? kDot : (c == 'e' || c == 'E') ? kExp : -1;
    case kInt: return d ? kInt : c == '.' ? kDot : (c == 'e' || c == 'E') ? kExp : -1;
    case kDot: return d ? kFrac : -1;
    case kFrac: return d ? kFrac : (c == 'e' || c == 'E') ? kExp : -1;
    case kExp: return d ? kExpDigits : (c == '+' || c == '-') ? kExpSign : -1;
    case kExpSign: return d ? kExpDigits : -1;
    case kExpDigits: return d ? kExpDigits : -1;
  }
  return -1;
}

}  // namespace

JsonCursor::JsonCursor(std::size_t begin) : begin_(begin), pos_(begin) {}

// A value just ended at pos_: the container around it (if any) now wants a comma or its close.
void JsonCursor::value_done() {
  token_ = Token::none;
  if (stack_.empty()) {
    status_ = Scan::complete;
  } else {
    expect_ = Expect::comma_or_close;
  }
}

bool JsonCursor::start_value(char c) {
  if (c == '{' || c == '[') {
    if (stack_.size() >= kMaxOpen) return false;
    stack_.push_back(c);
    expect_ = c == '{' ? Expect::key_or_close : Expect::value_or_close;
  } else if (c == '"') {
    token_ = Token::string;
    sub_ = 0;
  } else if (c == '-' || is_json_digit(c)) {
    token_ = Token::number;
    sub_ = c == '-' ? kMinus : c == '0' ? kZero : kInt;
  } else if (c == 't' || c == 'f' || c == 'n') {
    token_ = Token::word;
    word_ = c == 't' ? "true" : c == 'f' ? "false" : "null";
    sub_ = 1;
  } else {
    return false;
  }
  return true;
}

// One byte inside a string: sub_ is 0 normally, 1 after a backslash, 2..5 while \u digits are due.
bool JsonCursor::string_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (sub_ >= 2) {
    if (!is_json_hex(c)) return false;
    sub_ = sub_ == 5 ? 0 : sub_ + 1;
  } else if (sub_ == 1) {
    if (c == 'u') sub_ = 2;
    else if (std::string_view("\"\\/bfnrt").find(c) != std::string_view::npos) sub_ = 0;
    else return false;
  } else if (c == '\\') {
    sub_ = 1;
  } else if (c == '"') {
    if (expect_ == Expect::key_string) {
      token_ = Token::none;
      expect_ = Expect::colon;
    } else {
      value_done();
    }
  } else if (u < 0x20) {
    return false;
  }
  return true;
}

// One byte between tokens, by what the innermost container expects next.
bool JsonCursor::structure_byte(char c) {
  const bool top = stack_.empty();
  if (is_json_space(c)) return !top;  // the top-level value starts at `begin`, with no space before it
  switch (expect_) {
    case Expect::value: return start_value(c);
    case Expect::value_or_close:
      if (c == ']') { stack_.pop_back(); value_done(); return true; }
      return start_value(c);
    case Expect::key_or_close:
      if (c == '}') { stack_.pop_back(); value_done(); return true; }
      [[fallthrough]];
    case Expect::key:
      if (c != '"') return false;
      token_ = Token::string;
      expect_ = Expect::key_string;
      sub_ = 0;
      return true;
    case Expect::colon:
      if (c != ':') return false;
      expect_ = Expect::value;
      return true;
    case Expect::comma_or_close: {
      const char open = stack_.back();
      if (c == ',') { expect_ = open == '{' ? Expect::key : Expect::value; return true; }
      if ((open == '{' && c == '}') || (open == '[' && c == ']')) { stack_.pop_back(); value_done(); return true; }
      return false;
    }
    case Expect::key_string: break;
  }
  return false;
}

JsonScan JsonCursor::scan(std::string_view s) {
  while (status_ == Scan::incomplete && pos_ < s.size()) {
    const char c = s[pos_];
    if (token_ == Token::number) {
      const int next = number_next(sub_, c);
      if (next >= 0) { sub_ = next; ++pos_; continue; }
      if (!number_may_end(sub_)) { status_ = Scan::invalid; break; }
      value_done();  // the byte ends the number; read it again as structure
      continue;
    }
    bool ok = true;
    if (token_ == Token::string) {
      ok = string_byte(c);
    } else if (token_ == Token::word) {
      ok = c == word_[sub_];
      if (ok && word_[++sub_] == '\0') value_done();
    } else {
      ok = structure_byte(c);
    }
    if (!ok) { status_ = Scan::invalid; break; }
    ++pos_;
  }
  return {status_, status_ == Scan::incomplete ? s.size() : pos_};
}

JsonScan JsonMemo::scan(std::string_view s, std::size_t pos) {
  if (const auto done = complete_.find(pos); done != complete_.end()) return {Scan::complete, done->second};
  if (!open_ || open_->begin() != pos) open_.emplace(pos);
  const JsonScan v = open_->scan(s);
  if (v.status == Scan::complete) complete_.emplace(pos, v.end);
  if (v.status != Scan::incomplete) open_.reset();
  return v;
}

namespace {
thread_local JsonMemo* active_memo = nullptr;
}  // namespace

MemoScope::MemoScope(JsonMemo& memo) : previous_(active_memo) { active_memo = &memo; }
MemoScope::~MemoScope() { active_memo = previous_; }

JsonScan scan_buffer_value(std::string_view s, std::size_t pos) {
  return active_memo ? active_memo->scan(s, pos) : scan_json_value(s, pos);
}

}  // namespace loom::compute::reply_detail
