// Jinja expressions (parser_impl.hpp): the full grammar, with the depth of every tree checked.
#include <cstdlib>
#include <limits>

#include "parser_impl.hpp"

namespace loom::compute::jinja::detail {

// Chains (a + b + c..., x|f|g..., a.b.c...) are parsed in loops but evaluated recursively, so the depth of
// every expression tree is bounded too. The walk stops at the limit, so it never recurses deeper itself.
void Parser::check_tree(const Expr& e, std::size_t depth) const {
  if (depth > limits_.max_nesting)
    throw TemplateError(ErrorKind::syntax, "expression nested deeper than the limit of " + std::to_string(limits_.max_nesting),
                        static_cast<std::size_t>(e.line));
  for (const auto& k : e.kids)
    if (k) check_tree(*k, depth + 1);
}

// A comma-separated tuple without parentheses where the grammar allows one ({{ a, b }}, set x = a, b).
ExprPtr Parser::parse_tuple(bool with_condexpr) {
  ExprPtr e = parse_tuple_unchecked(with_condexpr);
  check_tree(*e, 0);
  return e;
}

ExprPtr Parser::parse_checked() {
  ExprPtr e = parse_expression(true);
  check_tree(*e, 0);
  return e;
}

ExprPtr Parser::parse_tuple_unchecked(bool with_condexpr) {
  int line = cur().line;
  ExprPtr first = parse_expression(with_condexpr);
  if (!is_op(",")) return first;
  auto t = node(ExprKind::tuple, line);
  t->kids.push_back(std::move(first));
  while (accept_op(",")) {
    if (cur().type == Tok::block_end || cur().type == Tok::var_end || is_op(")") || is_name("if")) break;
    t->kids.push_back(parse_expression(with_condexpr));
  }
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Nest nest(*this);
  ExprPtr expr = parse_or();
  if (!with_condexpr) return expr;
  while (is_name("if")) {
    int line = cur().line;
    advance();
    auto c = node(ExprKind::conditional, line);
    c->kids.push_back(parse_or());
    c->kids.push_back(std::move(expr));
    c->kids.push_back(accept_name("else") ? parse_expression(true) : nullptr);
    expr = std::move(c);
  }
  return expr;
}

ExprPtr Parser::binary(ExprKind kind, Op op, ExprPtr l, ExprPtr r, int line) {
  auto b = node(kind, line);
  b->op = op;
  b->kids.push_back(std::move(l));
  b->kids.push_back(std::move(r));
  return b;
}

ExprPtr Parser::parse_or() {
  ExprPtr l = parse_and();
  while (is_name("or")) {
    int line = cur().line;
    advance();
    l = binary(ExprKind::logic_or, Op::none, std::move(l), parse_and(), line);
  }
  return l;
}

ExprPtr Parser::parse_and() {
  ExprPtr l = parse_not();
  while (is_name("and")) {
    int line = cur().line;
    advance();
    l = binary(ExprKind::logic_and, Op::none, std::move(l), parse_not(), line);
  }
  return l;
}

ExprPtr Parser::parse_not() {
  Nest nest(*this);
  if (is_name("not")) {
    auto u = node(ExprKind::unary, cur().line);
    advance();
    u->op = Op::not_;
    u->kids.push_back(parse_not());
    return u;
  }
  return parse_compare();
}

Op Parser::comparison_op() {
  Op op = Op::none;
  if (cur().type == Tok::op) {
    const std::string& t = cur().text;
    if (t == "==") op = Op::eq;
    else if (t == "!=") op = Op::ne;
    else if (t == "<") op = Op::lt;
    else if (t == "<=") op = Op::le;
    else if (t == ">") op = Op::gt;
    else if (t == ">=") op = Op::ge;
    if (op != Op::none) advance();
  } else if (is_name("in")) {
    op = Op::in;
    advance();
  } else if (is_name("not") && peek().type == Tok::name && peek().text == "in") {
    op = Op::not_in;
    advance();
    advance();
  }
  return op;
}

// One comparison is a binary node; a chain (a < b < c) is a compare node, true when every pair holds, each
// operand evaluated once, as in Python.
ExprPtr Parser::parse_compare() {
  int line = cur().line;
  ExprPtr first = parse_math1();
  Op op = comparison_op();
  if (op == Op::none) return first;
  ExprPtr second = parse_math1();
  Op next = comparison_op();
  if (next == Op::none) return binary(ExprKind::binary, op, std::move(first), std::move(second), line);
  auto chain = node(ExprKind::compare, line);
  chain->kids.push_back(std::move(first));
  chain->kids.push_back(std::move(second));
  chain->ops.push_back(op);
  for (; next != Op::none; next = comparison_op()) {
    chain->ops.push_back(next);
    chain->kids.push_back(parse_math1());
  }
  return chain;
}

ExprPtr Parser::parse_math1() {
  ExprPtr l = parse_concat();
  while (is_op("+") || is_op("-")) {
    Op op = is_op("+") ? Op::add : Op::sub;
    int line = cur().line;
    advance();
    l = binary(ExprKind::binary, op, std::move(l), parse_concat(), line);
  }
  return l;
}

ExprPtr Parser::parse_concat() {
  ExprPtr l = parse_math2();
  while (is_op("~")) {
    int line = cur().line;
    advance();
    l = binary(ExprKind::binary, Op::concat, std::move(l), parse_math2(), line);
  }
  return l;
}

ExprPtr Parser::parse_math2() {
  ExprPtr l = parse_pow();
  for (;;) {
    Op op = is_op("*") ? Op::mul : is_op("/") ? Op::div : is_op("//") ? Op::floordiv : is_op("%") ? Op::mod : Op::none;
    if (op == Op::none) return l;
    int line = cur().line;
    advance();
    l = binary(ExprKind::binary, op, std::move(l), parse_pow(), line);
  }
}

ExprPtr Parser::parse_pow() {
  ExprPtr l = parse_unary(true);
  while (is_op("**")) {
    int line = cur().line;
    advance();
    l = binary(ExprKind::binary, Op::pow, std::move(l), parse_unary(true), line);
  }
  return l;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Nest nest(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = node(ExprKind::unary, cur().line);
    e->op = is_op("-") ? Op::neg : Op::pos;
    advance();
    e->kids.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::literal(Value v, int line) {
  auto e = node(ExprKind::literal, line);
  e->value = std::move(v);
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  int line = t.line;
  switch (t.type) {
    case Tok::name: {
      std::string name = t.text;
      advance();
      if (name == "true" || name == "True") return literal(Value::from(true), line);
      if (name == "false" || name == "False") return literal(Value::from(false), line);
      if (name == "none" || name == "None") return literal(Value::none(), line);
      auto e = node(ExprKind::name, line);
      e->name = std::move(name);
      return e;
    }
    case Tok::string: {
      std::string s;
      while (cur().type == Tok::string) {
        s += cur().text;
        advance();
      }
      return literal(Value::from(std::move(s)), line);
    }
    case Tok::integer: {
      Int v = 0;
      for (char c : t.text) {
        if (v > (std::numeric_limits<Int>::max() - 9) / 10) error("integer literal too large");
        v = v * 10 + (c - '0');
      }
      advance();
      return literal(Value::from(v), line);
    }
    case Tok::floating: {
      double d = std::strtod(t.text.c_str(), nullptr);
      advance();
      return literal(Value::from(d), line);
    }
    case Tok::op:
      if (t.text == "(") return parse_paren();
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      [[fallthrough]];
    default: error("unexpected " + describe(t));
  }
}

ExprPtr Parser::parse_paren() {
  int line = cur().line;
  advance();
  if (accept_op(")")) return node(ExprKind::tuple, line);
  ExprPtr first = parse_expression(true);
  if (accept_op(")")) return first;
  auto t = node(ExprKind::tuple, line);
  t->kids.push_back(std::move(first));
  while (accept_op(",")) {
    if (is_op(")")) break;
    t->kids.push_back(parse_expression(true));
  }
  expect_op(")");
  return t;
}

ExprPtr Parser::parse_list() {
  auto l = node(ExprKind::list, cur().line);
  advance();
  while (!is_op("]")) {
    if (!l->kids.empty()) expect_op(",");
    if (is_op("]")) break;
    l->kids.push_back(parse_expression(true));
  }
  expect_op("]");
  return l;
}

ExprPtr Parser::parse_dict() {
  auto d = node(ExprKind::dict, cur().line);
  advance();
  while (!is_op("}")) {
    if (!d->kids.empty()) expect_op(",");
    if (is_op("}")) break;
    d->kids.push_back(parse_expression(true));
    expect_op(":");
    d->kids.push_back(parse_expression(true));
  }
  expect_op("}");
  return d;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  for (;;) {
    int line = cur().line;
    if (is_op(".")) {
      advance();
      auto a = node(ExprKind::attr, line);
      if (cur().type == Tok::name) {
        a->name = cur().text;
        advance();
        a->kids.push_back(std::move(e));
        e = std::move(a);
      } else if (cur().type == Tok::integer) {
        auto it = node(ExprKind::item, line);
        it->kids.push_back(std::move(e));
        it->kids.push_back(parse_primary());
        e = std::move(it);
      } else {
        error("expected an attribute name after '.'");
      }
    } else if (is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr target) {
  Nest nest(*this);
  int line = cur().line;
  advance();
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (accept_op("]")) {
      auto it = node(ExprKind::item, line);
      it->kids.push_back(std::move(target));
      it->kids.push_back(std::move(start));
      return it;
    }
  }
  auto s = node(ExprKind::slice, line);
  s->kids.push_back(std::move(target));
  s->kids.push_back(std::move(start));
  expect_op(":");
  s->kids.push_back(is_op(":") || is_op("]") ? nullptr : parse_expression(true));
  if (accept_op(":")) s->kids.push_back(is_op("]") ? nullptr : parse_expression(true));
  else s->kids.push_back(nullptr);
  expect_op("]");
  return s;
}

void Parser::parse_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
    std::string name;
    if (cur().type == Tok::name && peek().type == Tok::op && peek().text == "=") {
      name = cur().text;
      advance();
      advance();
    } else if (!e.arg_names.empty() && !e.arg_names.back().empty()) {
      error("positional argument follows keyword argument");  // the last one tells: keywords only follow
    }
    e.arg_names.push_back(std::move(name));
    e.kids.push_back(parse_expression(true));
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  Nest nest(*this);
  auto c = node(ExprKind::call, cur().line);
  c->kids.push_back(std::move(callee));
  parse_args(*c);
  return c;
}

ExprPtr Parser::parse_filter(ExprPtr value) {
  Nest nest(*this);
  auto f = node(ExprKind::filter, cur().line);
  f->name = expect_identifier();
  while (is_op(".") && peek().type == Tok::name) {
    advance();
    f->name += "." + cur().text;
    advance();
  }
  f->kids.push_back(std::move(value));
  if (is_op("(")) parse_args(*f);
  return f;
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (accept_op("|")) {
      e = parse_filter(std::move(e));
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_test(ExprPtr value) {
  Nest nest(*this);
  auto t = node(ExprKind::test, cur().line);
  advance();  // is
  t->negated = accept_name("not");
  t->name = expect_identifier();
  while (is_op(".") && peek().type == Tok::name) {
    advance();
    t->name += "." + cur().text;
    advance();
  }
  t->kids.push_back(std::move(value));
  if (is_op("(")) {
    parse_args(*t);
  } else if ((cur().type == Tok::name || cur().type == Tok::string || cur().type == Tok::integer ||
              cur().type == Tok::floating || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("is") &&
             !is_name("in") && !is_name("not")) {
    t->arg_names.emplace_back();
    t->kids.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

}  // namespace loom::compute::jinja::detail
