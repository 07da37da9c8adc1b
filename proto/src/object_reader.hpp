// Internal to loom_proto: the pieces every parser is built from. Each reads one JSON value against one rule
// and, when the rule is broken, reports it with the value's path, so the parsers themselves are straight
// lists of reads. Not a public header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "loom/proto/parse_options.hpp"
#include "loom/proto/parsed.hpp"
#include "loom/proto/validation_error.hpp"

namespace loom::proto::detail {

using Json = nlohmann::json;

// Thrown by the readers below and caught by guarded() at the public boundary, so it never reaches a caller.
// Unwinding replaces an error check after every single read.
struct Invalid {
  ValidationError error;
};

[[noreturn]] void fail(std::string field, std::string message);

std::string child_path(const std::string& parent, std::string_view key);
std::string index_path(const std::string& parent, std::size_t index);

// How a value is shown after "got": scalars by value (strings quoted and cut short, since they come from
// the client and end up in logs), containers by kind.
std::string describe(const Json& value);
std::string echo_text(std::string_view text);
std::string format_number(double value);

// An interval of accepted numbers, printed the way the rule reads: "in (0, 1]", or ">= 0" when the upper
// end is infinite.
struct Interval {
  double low;
  double high;
  bool low_open = false;
  bool high_open = false;

  bool contains(double value) const;
  std::string to_string() const;
};

std::string read_string(const Json& value, const std::string& path);
bool read_bool(const Json& value, const std::string& path);
// A JSON integer (never a float such as 2.0 or 2.5) within [low, high].
std::int64_t read_integer(const Json& value, const std::string& path, std::int64_t low, std::int64_t high);
// A non-negative JSON integer up to 2^64 - 1.
std::uint64_t read_unsigned(const Json& value, const std::string& path);
// Any finite JSON number within range.
double read_number(const Json& value, const std::string& path, const Interval& range);
// Ids become map keys and log fields: non-empty, at most max_id_bytes, no control characters.
std::string read_id(const Json& value, const std::string& path, const ParseOptions& options);
void check_id(const std::string& id, const std::string& path, const ParseOptions& options);
void check_max_bytes(const std::string& text, const std::string& path, std::size_t max_bytes);

// The well-formed "id" of an object, or empty: lets an error be routed to the request it is about.
std::string peek_id(const Json& value, const ParseOptions& options);
// The well-formed "session_id" of a session.* message (session.open, .close, .reset), or empty.
std::string peek_session_id(const Json& value, const ParseOptions& options);

// Reads the fields of one JSON object. A field that is null counts as absent.
class ObjectReader {
 public:
  // Fails unless value is an object.
  ObjectReader(const Json& value, std::string path, const ParseOptions& options);

  // In strict mode, fails on the first field (in key order) that is neither in `known` nor `extra` (a
  // message envelope adds "type" to its body's fields this way).
  void check_known(std::initializer_list<std::string_view> known, std::string_view extra = {}) const;
  // nullptr when absent or null.
  const Json* find(const char* key) const;
  // Fails with "is required" when absent or null.
  const Json& require(const char* key) const;
  std::string path(const char* key) const { return child_path(path_, key); }
  const ParseOptions& options() const { return options_; }

 private:
  const Json& value_;
  std::string path_;
  const ParseOptions& options_;
};

// Runs a parser and turns what it throws into the error result; the only exception let through is
// std::bad_alloc. `id_source`, when given, supplies the error's request_id.
template <class T, class Parse>
Parsed<T> guarded(Parse&& parse, const Json* id_source, const ParseOptions& options) {
  ValidationError error;
  try {
    return Parsed<T>(std::forward<Parse>(parse)());
  } catch (Invalid& invalid) {
    error = std::move(invalid.error);
  } catch (const nlohmann::json::exception& e) {
    // The readers check types before converting, so this means a reader missed a case; still a refusal.
    error = ValidationError{"", std::string("malformed value: ") + e.what(), ""};
  }
  if (id_source != nullptr) {
    error.request_id = peek_id(*id_source, options);
    error.session_id = peek_session_id(*id_source, options);
  }
  return Parsed<T>(std::move(error));
}

}  // namespace loom::proto::detail
