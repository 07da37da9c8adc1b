// Internal to the reply parser: an incremental JSON scanner and the per-family scanners of call groups.
// Every scanner looks at a buffer that may end anywhere and says whether the text from `pos` is complete,
// still a valid prefix (incomplete), or can no longer become valid (invalid). The verdict on a prefix never
// contradicts the verdict on a longer text (invalid stays invalid; a complete value keeps its end), which
// is what makes the stream parser's output independent of how the text was split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/reply_format.hpp"

namespace loom::compute::reply_detail {

// JSON's own character classes (RFC 8259: whitespace is these four bytes only).
inline bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline bool is_json_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_json_hex(char c) { return is_json_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

enum class Scan { complete, incomplete, invalid };

struct JsonScan {
  Scan status;
  std::size_t end;  // complete: one past the value; otherwise the buffer's end or the offending byte
};

// Scans one JSON value at s[pos] (no leading whitespace skipped).
JsonScan scan_json_value(std::string_view s, std::size_t pos);

// scan_json_value() that can be resumed: scan() reads the bytes of s from where the last call stopped
// (s must extend the text given before) and gives the verdict on the whole value from `begin`.
class JsonCursor {
 public:
  explicit JsonCursor(std::size_t begin);
  JsonScan scan(std::string_view s);
  std::size_t begin() const noexcept { return begin_; }

 private:
  enum class Expect : std::uint8_t { value, value_or_close, key, key_or_close, key_string, colon, comma_or_close };
  enum class Token : std::uint8_t { none, string, number, word };
  void value_done();
  bool start_value(char c);
  bool string_byte(char c);
  bool structure_byte(char c);

  std::size_t begin_ = 0;
  std::size_t pos_ = 0;
  std::vector<char> stack_;  // open containers: '{' or '['
  Expect expect_ = Expect::value;
  Token token_ = Token::none;
  int sub_ = 0;  // string: escape state; number: phase; word: letters read
  const char* word_ = "";
  Scan status_ = Scan::incomplete;
};

// The values scanned in one call group's text, which only grows at its end while the group is open: a
// complete value keeps its end, and the one value still open at the end resumes where it stopped.
class JsonMemo {
 public:
  JsonScan scan(std::string_view s, std::size_t pos);
  void clear() {
    complete_.clear();
    open_.reset();
  }

 private:
  std::unordered_map<std::size_t, std::size_t> complete_;
  std::optional<JsonCursor> open_;
};

// While one is alive, scan_buffer_value() goes through `memo` (the stream parser sets it around a scan of
// its buffer; the scanners below are free functions that know nothing of the parser).
class MemoScope {
 public:
  explicit MemoScope(JsonMemo& memo);
  ~MemoScope();
  MemoScope(const MemoScope&) = delete;
  MemoScope& operator=(const MemoScope&) = delete;

 private:
  JsonMemo* previous_;
};

// scan_json_value() of a value in the parser's buffer, through the active memo if any.
JsonScan scan_buffer_value(std::string_view s, std::size_t pos);

std::size_t skip_space(std::string_view s, std::size_t pos);

// Whether s[pos..] starts with `literal`: complete, incomplete (s ends within a prefix of it), invalid.
Scan match_literal(std::string_view s, std::size_t pos, std::string_view literal);

// A call as scanned so far. `streamable`: name complete and the arguments began as a JSON object, so the
// name and arguments (a valid JSON prefix) may be shown. For a complete call, arguments() is final. The
// arguments are a span of the scanned text (not copied: a scan per piece must not copy the whole call), or
// the decoded text when the model wrote them as a JSON string.
struct ScannedCall {
  std::string name;
  std::size_t args_begin = 0;
  std::size_t args_end = 0;
  std::string decoded_args;  // never empty when used: a JSON object is at least "{}"
  bool complete = false;
  bool streamable = false;

  std::string_view arguments(std::string_view scanned) const {
    if (!decoded_args.empty()) return decoded_args;
    return scanned.substr(args_begin, args_end - args_begin);
  }
};

struct GroupScan {
  Scan status = Scan::invalid;
  std::size_t end = 0;             // complete: bytes of the group
  std::vector<ScannedCall> calls;  // complete calls, then maybe one streamable partial call
  bool closable = false;           // incomplete, but every call is complete: only closing markers are missing
};

// The call-opening markers of a format, in the order they are tried.
const std::vector<std::string>& call_triggers(ToolCallFormat format);

// Scans the call group that starts at s[0] with one of call_triggers(format) (llama3: or with '{').
GroupScan scan_group(ToolCallFormat format, std::string_view s);

// Decodes a complete JSON string token; false when the scanner let through what the decoder refuses (a lone
// surrogate escape, bytes that are not UTF-8): such a string never makes a call.
bool decode_json_string(std::string_view token, std::string& out);

// The end of s[0..end) cut back so that it does not stop inside a UTF-8 character.
std::size_t utf8_safe_end(std::string_view s, std::size_t end);

}  // namespace loom::compute::reply_detail
