// The JSON Schema converter's string formats and integer ranges: grammars that produce only valid values
// (a date's day fits its month, February 29th only in leap years, years 0001 to 9999 as Python's
// date.fromisoformat() wants them) and decimal integers exactly within their bounds.
#include <string>

#include "schema_internal.hpp"

namespace loom::compute::grammar::schema {

namespace {

std::string date_rule(GbnfWriter& out, const Where& where) {
  const std::string year = out.rule("date-year", R"([0-9]{3} [1-9] | [0-9]{2} [1-9] "0" | [0-9] [1-9] "00" | [1-9] "000")", where);
  // Divisible by 4 and not by 100, or by 400 (and not 0000).
  const std::string leap = out.rule(
      "leap-year", R"([0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ("0" [48] | [2468] [048] | [13579] [26]) "00")", where);
  const std::string month_day = out.rule(
      "month-day",
      R"(("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))",
      where);
  return out.rule("date", year + " \"-\" " + month_day + " | " + leap + " \"-02-29\"", where);
}

// RFC 3339 full-time: hours 00-23, an optional fraction, then Z or an offset (no leap second).
std::string time_rule(GbnfWriter& out, const Where& where) {
  return out.rule(
      "time",
      R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]+)? ("Z" | [-+] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
      where);
}

std::string digits(std::uint64_t v) { return std::to_string(v); }

std::uint64_t power10(std::size_t n) {
  std::uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(std::size_t n) {
  if (n == 0) return "";
  return n == 1 ? " [0-9]" : " [0-9]{" + std::to_string(n) + "}";
}

// Digit strings from lo to hi, both of the same length: the classic split on the first digit.
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return "\"" + lo + "\"";
  const char a = lo[0];
  const char b = hi[0];
  const std::string rest_lo = lo.substr(1);
  const std::string rest_hi = hi.substr(1);
  const std::size_t n = rest_lo.size();
  if (a == b) return std::string("\"") + a + "\" " + same_length(rest_lo, rest_hi);
  const bool lo_full = rest_lo == std::string(n, '0');
  const bool hi_full = rest_hi == std::string(n, '9');
  std::vector<std::string> alternatives;
  if (!lo_full) alternatives.push_back(std::string("\"") + a + "\" " + same_length(rest_lo, std::string(n, '9')));
  const char start = lo_full ? a : static_cast<char>(a + 1);
  const char end = hi_full ? b : static_cast<char>(b - 1);
  if (start <= end) alternatives.push_back(digit_class(start, end) + any_digits(n));
  if (!hi_full) alternatives.push_back(std::string("\"") + b + "\" " + same_length(std::string(n, '0'), rest_hi));
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (std::size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

// Non-negative integers in [lo, hi] without leading zeros; hi nullopt: unbounded.
std::vector<std::string> non_negative(std::uint64_t lo, std::optional<std::uint64_t> hi) {
  std::vector<std::string> alternatives;
  const std::size_t lo_len = digits(lo).size();
  const std::size_t hi_len = hi ? digits(*hi).size() : lo_len;
  for (std::size_t len = lo_len; len <= hi_len; ++len) {
    const std::uint64_t first = std::max<std::uint64_t>(lo, len == 1 ? 0 : power10(len - 1));
    const std::uint64_t last = len >= 20 ? ~std::uint64_t{0} : std::min<std::uint64_t>(hi ? *hi : ~std::uint64_t{0}, power10(len) - 1);
    if (first <= last) alternatives.push_back(same_length(digits(first), digits(last)));
  }
  if (!hi) alternatives.push_back("[1-9]" + any_digits(lo_len) + " [0-9]*");  // every longer number
  return alternatives;
}

}  // namespace

std::string format_gbnf(const std::string& format, GbnfWriter& out, const Where& where) {
  if (format == "date") return date_rule(out, where);
  if (format == "time") return time_rule(out, where);
  if (format == "date-time") return out.rule("date-time", date_rule(out, where) + " \"T\" " + time_rule(out, where), where);
  if (format == "uuid") {
    return out.rule("uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})", where);
  }
  if (format == "email") {
    // A dot-atom local part and a host name of two or more labels: plain addresses, no quoting.
    const std::string atom = out.rule("email-atom", R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+)", where);
    const std::string label = out.rule("email-label", R"([A-Za-z0-9] ([A-Za-z0-9\-]* [A-Za-z0-9])?)", where);
    return out.rule("email", atom + " (\".\" " + atom + ")* \"@\" " + label + " (\".\" " + label + ")+", where);
  }
  if (format == "ipv4") {
    const std::string octet = out.rule("ipv4-octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9]? [0-9])", where);
    return out.rule("ipv4", octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet, where);
  }
  where.fail("format \"" + format + "\" is not supported (supported: date, time, date-time, uuid, email, ipv4)");
}

std::string integer_range_gbnf(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi, GbnfWriter& out,
                               const Where& where) {
  if (lo && hi && *lo > *hi) where.unsatisfiable("no integer lies within the bounds");
  std::vector<std::string> alternatives;
  if (!lo || *lo < 0) {  // negative numbers: '-' and a magnitude from m_lo to m_hi ("-0" is not written)
    const std::uint64_t m_lo = hi && *hi < 0 ? static_cast<std::uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<std::uint64_t> m_hi;
    if (lo) m_hi = static_cast<std::uint64_t>(-(*lo + 1)) + 1;
    for (const std::string& a : non_negative(m_lo, m_hi)) alternatives.push_back("\"-\" " + a);
  }
  if (!hi || *hi >= 0) {
    std::optional<std::uint64_t> top;
    if (hi) top = static_cast<std::uint64_t>(*hi);
    for (const std::string& a : non_negative(lo && *lo > 0 ? static_cast<std::uint64_t>(*lo) : 0, top)) alternatives.push_back(a);
  }
  std::string body;
  for (std::size_t i = 0; i < alternatives.size(); ++i) body += (i ? " | " : "") + alternatives[i];
  return out.rule("integer-range", body, where);
}

namespace {

// Numbers I.F >= 0 (I without leading zeros, F optional) between magnitudes lo and hi. Write v = I + f: a
// "zero" fraction (none, or all zeros) gives v = I, which must lie within the bounds themselves; a nonzero one
// gives I < v < I + 1, so I may reach the lower bound even when it is exclusive and must stay below the upper.
std::vector<std::string> magnitudes(NumberBound lo, std::optional<NumberBound> hi, GbnfWriter& out, const Where& where) {
  std::vector<std::string> alternatives;
  auto add = [&](std::int64_t a, std::optional<std::int64_t> b, const char* fraction) {
    if (b && a > *b) return;
    alternatives.push_back(integer_range_gbnf(a, b, out, where) + fraction);
  };
  std::optional<std::int64_t> zero_hi;
  std::optional<std::int64_t> nonzero_hi;
  if (hi) {
    zero_hi = hi->value - (hi->exclusive ? 1 : 0);
    nonzero_hi = hi->value - 1;
  }
  const std::int64_t zero_lo = lo.value + (lo.exclusive ? 1 : 0);
  if (zero_lo == lo.value && zero_hi == nonzero_hi) {
    add(zero_lo, zero_hi, R"( ("." [0-9]+)?)");
    return alternatives;
  }
  add(zero_lo, zero_hi, R"( ("." "0"+)?)");
  add(lo.value, nonzero_hi, R"( "." [0-9]* [1-9] [0-9]*)");
  return alternatives;
}

}  // namespace

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi, GbnfWriter& out,
                              const Where& where) {
  std::vector<std::string> alternatives;
  if (!hi || hi->value >= 0) {  // written without '-': magnitudes from max(lo, 0)
    const NumberBound from = lo && lo->value >= 0 ? *lo : NumberBound{0, false};
    alternatives = magnitudes(from, hi, out, where);
  }
  if (!lo || lo->value < 0) {  // '-' and a magnitude above 0 ("-0" is not written), between -hi and -lo
    NumberBound from{0, true};
    if (hi && hi->value < 0) from = NumberBound{-hi->value, hi->exclusive};
    std::optional<NumberBound> to;
    if (lo) to = NumberBound{-lo->value, lo->exclusive};
    for (const std::string& a : magnitudes(from, to, out, where)) alternatives.push_back("\"-\" " + a);
  }
  if (alternatives.empty()) where.unsatisfiable("no number lies within the bounds");
  std::string body;
  for (std::size_t i = 0; i < alternatives.size(); ++i) body += (i ? " | " : "") + alternatives[i];
  return out.rule("number-range", body, where);
}

}  // namespace loom::compute::grammar::schema
