// Internal to the reply parser: an incremental JSON scanner and the per-family scanners of call groups.
// Every scanner looks at a buffer that may end anywhere and says whether the text from `pos` is complete,
// still a valid prefix (incomplete), or can no longer become valid (invalid). The verdict on a prefix never
// contradicts the verdict on a longer text (invalid stays invalid; a complete value keeps its end), which
// is what makes the stream parser's output independent of how the text was split.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/reply_format.hpp"

namespace loom::compute::reply_detail {

enum class Scan { complete, incomplete, invalid };

struct JsonScan {
  Scan status;
  std::size_t end;  // complete: one past the value; otherwise the buffer's end or the offending byte
};

// Scans one JSON value at s[pos] (no leading whitespace skipped).
JsonScan scan_json_value(std::string_view s, std::size_t pos);

std::size_t skip_space(std::string_view s, std::size_t pos);

// Whether s[pos..] starts with `literal`: complete, incomplete (s ends within a prefix of it), invalid.
Scan match_literal(std::string_view s, std::size_t pos, std::string_view literal);

// A call as scanned so far. `streamable`: name complete and the arguments began as a JSON object, so the
// name and arguments (a valid JSON prefix) may be shown. For a complete call, `arguments` is final.
struct ScannedCall {
  std::string name;
  std::string arguments;
  bool complete = false;
  bool streamable = false;
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
