// The recursive-descent parser's state and productions (internal to parser*.cpp): statements are in
// parser.cpp, expressions in parser_expressions.cpp. Precedence, loosest first, as in jinja2: conditional, or,
// and, not, comparisons/in, + -, ~, * / // %, **, unary - +, then postfix (.attr, [item], calls) and
// filters/tests. Every recursive production holds a Nest, so nesting is bounded by Limits::max_nesting.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "ast.hpp"
#include "lexer.hpp"

namespace loom::compute::jinja::detail {

class Parser {
 public:
  Parser(std::vector<Token> tokens, const Limits& limits) : toks_(std::move(tokens)), limits_(limits) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

  // Chains (a + b + c..., x|f|g..., a.b.c...) are parsed in loops but evaluated recursively, so the depth of
  // every expression tree is bounded too. The walk stops at the limit, so it never recurses deeper itself.
  void check_tree(const Expr& e, std::size_t depth) const;

 private:
  // Nesting guard for every recursive production.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > p.limits_.max_nesting)
        p.error("template nesting is deeper than the limit of " + std::to_string(p.limits_.max_nesting));
    }
    ~Nest() { --p.depth_; }
  };

  [[noreturn]] void error(const std::string& message) const {
    throw TemplateError(ErrorKind::syntax, message, static_cast<std::size_t>(cur().line));
  }
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(std::size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::name && cur().text == name; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
  }
  void expect_name(const char* name) {
    if (!accept_name(name)) error(std::string("expected '") + name + "', got " + describe(cur()));
  }
  std::string expect_identifier() {
    if (cur().type != Tok::name) error("expected a name, got " + describe(cur()));
    std::string name = cur().text;
    advance();
    return name;
  }
  void expect_block_end() {
    if (cur().type != Tok::block_end) error("expected end of statement '%}', got " + describe(cur()));
    advance();
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::eof: return "end of template";
      case Tok::block_end: return "'%}'";
      case Tok::var_end: return "'}}'";
      case Tok::string: return "a string";
      case Tok::text: return "text";
      default: return "'" + t.text + "'";
    }
  }

  ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----

  Body parse_body(std::initializer_list<const char*> ends, std::string& which);

  std::unique_ptr<Stmt> parse_statement();

  Body body_until(std::initializer_list<const char*> ends, std::string& which) { return parse_body(ends, which); }

  void parse_simple_body(Stmt& s, const char* end);

  std::vector<std::string> parse_targets();

  void parse_for(Stmt& s);

  void parse_if(Stmt& s);

  void parse_set(Stmt& s);

  ExprPtr parse_filter_chain();

  void parse_params(Stmt& s);

  void parse_macro(Stmt& s);

  void parse_call_block(Stmt& s);

  void parse_filter_block(Stmt& s);

  void parse_with(Stmt& s);

  // ---- expressions ----

  // A comma-separated tuple without parentheses where the grammar allows one ({{ a, b }}, set x = a, b).
  ExprPtr parse_tuple(bool with_condexpr);

  ExprPtr parse_checked();

  ExprPtr parse_tuple_unchecked(bool with_condexpr);

  ExprPtr parse_expression(bool with_condexpr);

  ExprPtr binary(ExprKind kind, Op op, ExprPtr l, ExprPtr r, int line);

  ExprPtr parse_or();

  ExprPtr parse_and();

  ExprPtr parse_not();

  Op comparison_op();

  // One comparison is a binary node; a chain (a < b < c) is a compare node, true when every pair holds, each
  // operand evaluated once, as in Python.
  ExprPtr parse_compare();

  ExprPtr parse_math1();

  ExprPtr parse_concat();

  ExprPtr parse_math2();

  ExprPtr parse_pow();

  ExprPtr parse_unary(bool with_filter);

  ExprPtr literal(Value v, int line);

  ExprPtr parse_primary();

  ExprPtr parse_paren();

  ExprPtr parse_list();

  ExprPtr parse_dict();

  ExprPtr parse_postfix(ExprPtr e);

  ExprPtr parse_subscript(ExprPtr target);

  void parse_args(Expr& e);

  ExprPtr parse_call(ExprPtr callee);

  ExprPtr parse_filter(ExprPtr value);

  ExprPtr parse_filter_expr(ExprPtr e);

  ExprPtr parse_test(ExprPtr value);

  std::vector<Token> toks_;
  const Limits& limits_;
  std::size_t i_ = 0;
  std::size_t depth_ = 0;
  int loop_depth_ = 0;
};


}  // namespace loom::compute::jinja::detail
