// Tokenizer for Jinja templates (lexer.hpp).
#include "lexer.hpp"

#include <cstring>

#include "../unicode_text.hpp"

namespace loom::compute::jinja::detail {
namespace {

[[noreturn]] void syntax_error(const std::string& message, int line) {
  throw TemplateError(ErrorKind::syntax, message, static_cast<std::size_t>(line));
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's unicode-escape decoding of a string literal's body: unknown escapes stay as written.
std::string decode_escapes(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  for (std::size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    switch (e) {
      case 'n': out.push_back('\n'); continue;
      case 't': out.push_back('\t'); continue;
      case 'r': out.push_back('\r'); continue;
      case '\\': out.push_back('\\'); continue;
      case '\'': out.push_back('\''); continue;
      case '"': out.push_back('"'); continue;
      case 'a': out.push_back('\a'); continue;
      case 'b': out.push_back('\b'); continue;
      case 'f': out.push_back('\f'); continue;
      case 'v': out.push_back('\v'); continue;
      case '\n': continue;  // line continuation
      default: break;
    }
    if (e >= '0' && e <= '7') {
      unsigned v = 0;
      std::size_t n = 0;
      while (n < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') v = v * 8 + unsigned(body[i++] - '0'), ++n;
      --i;
      compute::detail::append_utf8(out, static_cast<char32_t>(v));
      continue;
    }
    std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0) {
      out.push_back('\\');
      out.push_back(e);
      continue;
    }
    char32_t v = 0;
    for (std::size_t k = 0; k < digits; ++k) {
      int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
      if (h < 0) syntax_error("truncated \\" + std::string(1, e) + " escape in a string literal", line);
      v = v * 16 + static_cast<char32_t>(h);
    }
    i += digits;
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) syntax_error("invalid escape in a string literal", line);
    compute::detail::append_utf8(out, v);
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      std::size_t tag = find_tag(pos_);
      std::string text = src_.substr(pos_, (tag == std::string::npos ? src_.size() : tag) - pos_);
      if (tag == std::string::npos) {
        emit_text(std::move(text));
        pos_ = src_.size();
        break;
      }
      char kind = src_[tag + 1];
      char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      strip_before(text, kind, modifier, pos_);
      emit_text(std::move(text));
      count_lines(pos_, tag);
      pos_ = tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      if (kind == '#') {
        comment();
      } else if (kind == '%' && raw_block()) {
      } else {
        tag_tokens(kind);
      }
    }
    tokens_.push_back(Token{Tok::eof, "", line_});
    return std::move(tokens_);
  }

 private:
  std::size_t find_tag(std::size_t from) const {
    for (std::size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  // `{%-` strips all whitespace before the tag; lstrip_blocks strips spaces and tabs back to the start of the
  // line for block and comment tags when nothing else stands there (`{%+` keeps them).
  void strip_before(std::string& text, char kind, char modifier, std::size_t text_start) const {
    if (modifier == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
      return;
    }
    if (modifier == '+' || kind == '{') return;
    std::size_t nl = text.rfind('\n');
    std::size_t line_start = nl == std::string::npos ? 0 : nl + 1;
    bool at_line_start = nl != std::string::npos || text_start == 0 || src_[text_start - 1] == '\n';
    if (!at_line_start) return;
    for (std::size_t i = line_start; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return;
    text.resize(line_start);
  }

  // After a tag: `-%}` strips all whitespace that follows; trim_blocks drops one newline after a block or
  // comment tag (`+%}` keeps it).
  void after_tag_end(char modifier, bool block_like) {
    if (modifier == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
    } else if (modifier != '+' && block_like && pos_ < src_.size() && src_[pos_] == '\n') {
      ++line_;
      ++pos_;
    }
  }

  void comment() {
    std::size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) syntax_error("unterminated comment", line_);
    char modifier = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    count_lines(pos_, end);
    pos_ = end + 2;
    after_tag_end(modifier, true);
  }

  // `{% raw %}...{% endraw %}`: the body is text, never tags.
  bool raw_block() {
    std::size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    char modifier = '\0';
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) modifier = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    count_lines(pos_, p + 2);
    pos_ = p + 2;
    after_tag_end(modifier, true);
    for (std::size_t q = find_tag(pos_); q != std::string::npos; q = find_tag(q + 1)) {
      if (src_[q + 1] != '%') continue;
      std::size_t r = q + 2;
      char open_mod = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r++] : '\0';
      while (r < src_.size() && is_space(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && is_space(src_[r])) ++r;
      char close_mod = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r++] : '\0';
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, q - pos_);
      if (open_mod == '-')
        while (!text.empty() && is_space(text.back())) text.pop_back();
      emit_text(std::move(text));
      count_lines(pos_, r + 2);
      pos_ = r + 2;
      after_tag_end(close_mod, true);
      return true;
    }
    syntax_error("missing endraw", line_);
  }

  void tag_tokens(char kind) {
    const bool block = kind == '%';
    const char close = block ? '%' : '}';
    tokens_.push_back(Token{block ? Tok::block_begin : Tok::var_begin, "", line_});
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) syntax_error(block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'", line_);
      if (depth == 0) {
        char modifier = (src_[pos_] == '-' || src_[pos_] == '+') ? src_[pos_] : '\0';
        std::size_t p = pos_ + (modifier ? 1 : 0);
        if (p + 1 < src_.size() && src_[p] == close && src_[p + 1] == '}' && (modifier != '+' || block)) {
          tokens_.push_back(Token{block ? Tok::block_end : Tok::var_end, "", line_});
          pos_ = p + 2;
          after_tag_end(modifier, block);
          return;
        }
      }
      lex_one(depth);
    }
  }

  void lex_one(int& depth) {
    char c = src_[pos_];
    if (is_name_start(c)) {
      std::size_t start = pos_;
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back(Token{Tok::name, src_.substr(start, pos_ - start), line_});
    } else if (is_digit(c)) {
      number();
    } else if (c == '\'' || c == '"') {
      string_literal(c);
    } else {
      op(depth);
    }
  }

  void number() {
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1])))) {
        if (src_[pos_] != '_') digits.push_back(src_[pos_]);
        ++pos_;
      }
    };
    take_digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      digits.push_back(src_[pos_++]);
      take_digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      std::size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        digits.append(src_, pos_, p - pos_);
        pos_ = p;
        take_digits();
      }
    }
    tokens_.push_back(Token{is_float ? Tok::floating : Tok::integer, std::move(digits), line_});
  }

  void string_literal(char quote) {
    int start_line = line_;
    std::size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) {
      if (src_[p] == '\\' && p + 1 < src_.size()) ++p;
      ++p;
    }
    if (p >= src_.size()) syntax_error("unterminated string literal", start_line);
    std::string_view body(src_.data() + pos_ + 1, p - pos_ - 1);
    count_lines(pos_, p);
    tokens_.push_back(Token{Tok::string, decode_escapes(body, start_line), start_line});
    pos_ = p + 1;
  }

  void op(int& depth) {
    static const char* const two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* t : two) {
      if (src_.compare(pos_, 2, t) == 0) {
        tokens_.push_back(Token{Tok::op, t, line_});
        pos_ += 2;
        return;
      }
    }
    char c = src_[pos_];
    if (!std::strchr("+-*/%~<>=.,:|()[]{}", c) || c == '\0')
      syntax_error(std::string("unexpected character '") + c + "'", line_);
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    tokens_.push_back(Token{Tok::op, std::string(1, c), line_});
    ++pos_;
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back(Token{Tok::text, std::move(text), line_});
  }

  void count_lines(std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to && i < src_.size(); ++i)
      if (src_[i] == '\n') ++line_;
  }

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_source_bytes)
    syntax_error("template source is " + std::to_string(source.size()) + " bytes, over the limit of " +
                     std::to_string(limits.max_source_bytes),
                 0);
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace loom::compute::jinja::detail
