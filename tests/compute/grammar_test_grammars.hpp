// Grammars shared by the grammar tests and the mask benchmark, written for loom (the shapes people use with
// GBNF: JSON, arithmetic, a bulleted list).
#pragma once

#include <memory>
#include <string>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"

namespace loom::compute::grammar::testing {

// Whether `text` is a whole sentence of `g`.
inline bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState state(g);
  return state.accept(text) && state.can_end();
}

inline constexpr const char* kJsonGrammar = R"g(# JSON (RFC 8259), whitespace limited to keep the model honest
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws

# at most one newline and a few spaces between tokens
ws ::= | " " | "\n" [ \t]{0,20}
)g";

inline constexpr const char* kArithmeticGrammar = R"g(root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g";

inline constexpr const char* kListGrammar = R"g(root ::= item{1,5}
item ::= "- " [^\n]+ "\n"
)g";

}  // namespace loom::compute::grammar::testing
