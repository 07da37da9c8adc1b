#include "json_text.hpp"

#include <string>

#include "object_reader.hpp"

namespace loom::proto::detail {

namespace {

// nlohmann's explanation without its "[json.exception.parse_error.101] parse error at line 1, column 5: "
// prefix (the offset we report replaces the position), cut short because it quotes the client's text.
std::string parse_error_detail(const nlohmann::json::parse_error& error) {
  std::string_view what = error.what();
  if (const auto at = what.find("parse error"); at != std::string_view::npos) {
    what.remove_prefix(at);
    if (const auto colon = what.find(": "); colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  constexpr std::size_t kMaxDetail = 160;
  if (what.size() <= kMaxDetail) return std::string(what);
  std::size_t cut = kMaxDetail;
  while (cut > 0 && (static_cast<unsigned char>(what[cut]) & 0xC0) == 0x80) --cut;
  return std::string(what.substr(0, cut)) + "...";
}

// A scan for bracket depth before parsing: it costs one pass over bytes already in cache and keeps a
// hostile "[[[[..." from building a deep tree at all.
void check_depth(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        fail("", "message must be nested at most " + std::to_string(max_depth) +
                     " levels deep, exceeded at byte offset " + std::to_string(i));
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const ParseOptions& options) {
  if (text.size() > options.max_message_bytes) {
    fail("", "message must be at most " + std::to_string(options.max_message_bytes) + " bytes, got " +
                 std::to_string(text.size()));
  }
  check_depth(text, options.max_json_depth);
  // A JSON text holds no NUL byte (not even in a string, where it is written \u0000), and the JSON reader
  // would take one for the end of the text, accepting `{...}\0garbage` as `{...}`.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    fail("", "invalid JSON at byte offset " + std::to_string(nul) + ": a NUL byte");
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& error) {
    // nlohmann counts bytes read including the offending one; report the 0-based offset of that byte.
    const std::size_t offset = error.byte > 0 ? error.byte - 1 : 0;
    fail("", "invalid JSON at byte offset " + std::to_string(offset) + ": " + parse_error_detail(error));
  } catch (const nlohmann::json::out_of_range& error) {
    // Valid grammar that no double holds, such as 1e400. nlohmann names the literal but not where it is;
    // its first occurrence in the text is where it is unless the same characters also appear in a string.
    std::string_view what = error.what();
    std::string literal;
    if (const auto open = what.find('\''); open != std::string_view::npos) {
      if (const auto close = what.find('\'', open + 1); close != std::string_view::npos) {
        literal = std::string(what.substr(open + 1, close - open - 1));
      }
    }
    const auto at = literal.empty() ? std::string_view::npos : text.find(literal);
    fail("", "invalid JSON: number out of range" +
                 (at == std::string_view::npos ? std::string() : " at byte offset " + std::to_string(at)) +
                 (literal.empty() ? std::string() : ": " + echo_text(literal)));
  }
}

}  // namespace loom::proto::detail
