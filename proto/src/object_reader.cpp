#include "object_reader.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>

namespace loom::proto::detail {

namespace {

// Client-supplied text echoed in an error is cut to this many bytes.
constexpr std::size_t kMaxEchoBytes = 40;

std::string hex_byte(unsigned char byte) {
  constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[byte >> 4] + kDigits[byte & 0xf];
}

std::string plural(std::size_t n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

}  // namespace

void fail(std::string field, std::string message) {
  throw Invalid{ValidationError{std::move(field), std::move(message), ""}};
}

std::string child_path(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string path = parent;
  path += '.';
  path += key;
  return path;
}

std::string index_path(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::array<char, 32> buffer{};
  const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (ec != std::errc()) return "?";
  return std::string(buffer.data(), end);
}

std::string echo_text(std::string_view text) {
  std::size_t cut = text.size();
  if (text.size() > kMaxEchoBytes) {
    cut = kMaxEchoBytes;
    // Back up to a character boundary so the echo stays valid UTF-8.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  }
  // Appended piece by piece: `"literal" + std::string` trips a false -Wrestrict in GCC 12 at -O3.
  std::string echo;
  echo.reserve(cut + 5);
  echo += '"';
  echo.append(text.substr(0, cut));
  echo += '"';
  if (cut < text.size()) echo += "...";
  return echo;
}

std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
      return std::to_string(value.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(value.get<std::uint64_t>());
    case Json::value_t::number_float: {
      // Keep a float visibly a float ("40.0"), or "must be an integer, got 40" would read as nonsense.
      std::string text = format_number(value.get<double>());
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      return text;
    }
    case Json::value_t::string:
      return echo_text(value.get_ref<const std::string&>());
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    default:
      return "a binary value";
  }
}

bool Interval::contains(double value) const {
  const bool above_low = low_open ? value > low : value >= low;
  const bool below_high = high_open ? value < high : value <= high;
  return above_low && below_high;
}

std::string Interval::to_string() const {
  if (std::isinf(high)) return (low_open ? "> " : ">= ") + format_number(low);
  if (std::isinf(low)) return (high_open ? "< " : "<= ") + format_number(high);
  return std::string("in ") + (low_open ? "(" : "[") + format_number(low) + ", " + format_number(high) +
         (high_open ? ")" : "]");
}

std::string read_string(const Json& value, const std::string& path) {
  if (!value.is_string()) fail(path, "must be a string, got " + describe(value));
  return value.get<std::string>();
}

bool read_bool(const Json& value, const std::string& path) {
  if (!value.is_boolean()) fail(path, "must be true or false, got " + describe(value));
  return value.get<bool>();
}

std::int64_t read_integer(const Json& value, const std::string& path, std::int64_t low, std::int64_t high) {
  const std::string rule = "must be an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
  if (!value.is_number_integer()) fail(path, rule + ", got " + describe(value));
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    // Compared as unsigned: above INT64_MAX it would turn negative as an int64.
    const bool below = low > 0 && u < static_cast<std::uint64_t>(low);
    const bool above = high < 0 || u > static_cast<std::uint64_t>(high);
    if (below || above) fail(path, rule + ", got " + std::to_string(u));
    return static_cast<std::int64_t>(u);
  }
  const auto i = value.get<std::int64_t>();
  if (i < low || i > high) fail(path, rule + ", got " + std::to_string(i));
  return i;
}

std::uint64_t read_unsigned(const Json& value, const std::string& path) {
  if (!value.is_number_unsigned()) fail(path, "must be a non-negative integer, got " + describe(value));
  return value.get<std::uint64_t>();
}

double read_number(const Json& value, const std::string& path, const Interval& range) {
  const std::string rule = "must be a number " + range.to_string();
  if (!value.is_number()) fail(path, rule + ", got " + describe(value));
  const double d = value.get<double>();
  // An overflowing literal such as 1e400 parses to infinity; JSON itself has no NaN but a json built in code can.
  if (!std::isfinite(d)) fail(path, "must be a finite number, got " + format_number(d));
  if (!range.contains(d)) fail(path, rule + ", got " + describe(value));
  return d;
}

void check_max_bytes(const std::string& text, const std::string& path, std::size_t max_bytes) {
  if (text.size() > max_bytes) {
    fail(path, "must be at most " + plural(max_bytes, "byte") + ", got " + std::to_string(text.size()));
  }
}

void check_id(const std::string& id, const std::string& path, const ParseOptions& options) {
  if (id.empty()) fail(path, "must not be empty");
  check_max_bytes(id, path, options.max_id_bytes);
  const auto bad = std::find_if(id.begin(), id.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
  if (bad != id.end()) {
    fail(path, "must not contain control characters, got byte " + hex_byte(static_cast<unsigned char>(*bad)) +
                   " at offset " + std::to_string(bad - id.begin()));
  }
}

std::string read_id(const Json& value, const std::string& path, const ParseOptions& options) {
  std::string id = read_string(value, path);
  check_id(id, path, options);
  return id;
}

namespace {
std::string peek_id_field(const Json& value, const char* key, const ParseOptions& options) {
  if (!value.is_object()) return {};
  const auto it = value.find(key);
  if (it == value.end() || !it->is_string()) return {};
  const auto& id = it->get_ref<const std::string&>();
  try {
    check_id(id, "id", options);
  } catch (const Invalid&) {
    return {};
  }
  return id;
}
}  // namespace

namespace {
// session.open, session.close, ...: messages about a session, which they name by session_id, not id.
bool is_session_message(const Json& value) {
  const auto type = value.find("type");
  return type != value.end() && type->is_string() && type->get_ref<const std::string&>().rfind("session.", 0) == 0;
}
}  // namespace

std::string peek_id(const Json& value, const ParseOptions& options) {
  if (!value.is_object() || is_session_message(value)) return {};
  return peek_id_field(value, "id", options);
}

std::string peek_session_id(const Json& value, const ParseOptions& options) {
  if (!value.is_object() || !is_session_message(value)) return {};
  return peek_id_field(value, "session_id", options);
}

ObjectReader::ObjectReader(const Json& value, std::string path, const ParseOptions& options)
    : value_(value), path_(std::move(path)), options_(options) {
  if (!value_.is_object()) fail(path_, "must be a JSON object, got " + describe(value_));
}

void ObjectReader::check_known(std::initializer_list<std::string_view> known, std::string_view extra) const {
  if (!options_.strict) return;
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    const std::string& key = it.key();
    if ((extra.empty() || key != extra) && std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list(extra);
      for (const auto name : known) {
        if (!list.empty()) list += ", ";
        list += name;
      }
      // The key comes from the client: cut a long one short, as any echoed text.
      std::string shown = key.size() <= kMaxEchoBytes ? key : echo_text(key);
      fail(child_path(path_, shown), "is not a known field (strict mode); known fields: " + list);
    }
  }
}

const Json* ObjectReader::find(const char* key) const {
  const auto it = value_.find(key);
  if (it == value_.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json& ObjectReader::require(const char* key) const {
  const Json* value = find(key);
  if (value == nullptr) fail(path(key), "is required");
  return *value;
}

}  // namespace loom::proto::detail
