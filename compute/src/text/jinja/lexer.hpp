// Template source to tokens (internal), with Jinja's whitespace rules as transformers configures them:
// trim_blocks, lstrip_blocks, `-`/`+` modifiers on tags, one trailing newline dropped, \r\n and \r read as
// \n, and `{% raw %}` blocks passed through as text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "loom/compute/text/jinja/template.hpp"

namespace loom::compute::jinja::detail {

enum class Tok : std::uint8_t { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };

struct Token {
  Tok type = Tok::eof;
  std::string text;  // text, name, operator, number digits, or a string literal's decoded value
  int line = 1;
};

// Throws TemplateError (syntax) for an unterminated tag, comment or string, or an unknown character.
std::vector<Token> tokenize(std::string_view source, const Limits& limits);

}  // namespace loom::compute::jinja::detail
