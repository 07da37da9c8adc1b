// Recursive-descent parser for Jinja templates (parser.hpp). Precedence, loosest first, as in jinja2:
// conditional, or, and, not, comparisons/in, + -, ~, * / // %, **, unary - +, then postfix (.attr, [item],
// calls) and filters/tests.
#include "parser.hpp"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "lexer.hpp"

namespace loom::compute::jinja::detail {
namespace {

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
  void check_tree(const Expr& e, std::size_t depth) const {
    if (depth > limits_.max_nesting)
      throw TemplateError(ErrorKind::syntax, "expression nested deeper than the limit of " + std::to_string(limits_.max_nesting),
                          static_cast<std::size_t>(e.line));
    for (const auto& k : e.kids)
      if (k) check_tree(*k, depth + 1);
  }

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

  Body parse_body(std::initializer_list<const char*> ends, std::string& which) {
    Nest nest(*this);
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::eof) {
        if (ends.size() == 0) return body;
        error(std::string("unexpected end of template, expected '") + *ends.begin() + "'");
      }
      if (t.type == Tok::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == Tok::var_begin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::output;
        s->line = t.line;
        advance();
        s->exprs.push_back(parse_tuple(true));
        if (cur().type != Tok::var_end) error("expected end of print statement '}}', got " + describe(cur()));
        advance();
        body.push_back(std::move(s));
      } else if (t.type == Tok::block_begin) {
        const Token& name = peek();
        for (const char* end : ends)
          if (name.type == Tok::name && name.text == end) {
            which = end;
            advance();
            advance();
            return body;
          }
        advance();
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    if (cur().type != Tok::name) error("expected a statement name, got " + describe(cur()));
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    std::string keyword = cur().text;
    advance();
    if (keyword == "for") parse_for(*s);
    else if (keyword == "if") parse_if(*s);
    else if (keyword == "set") parse_set(*s);
    else if (keyword == "macro") parse_macro(*s);
    else if (keyword == "call") parse_call_block(*s);
    else if (keyword == "filter") parse_filter_block(*s);
    else if (keyword == "with") parse_with(*s);
    else if (keyword == "generation") parse_simple_body(*s, "endgeneration");
    else if (keyword == "break" || keyword == "continue") {
      if (loop_depth_ == 0) error("'" + keyword + "' outside of a loop");
      s->kind = keyword == "break" ? StmtKind::break_ : StmtKind::continue_;
      expect_block_end();
    } else {
      --i_;
      error("unknown or unsupported statement '" + keyword + "'");
    }
    return s;
  }

  Body body_until(std::initializer_list<const char*> ends, std::string& which) { return parse_body(ends, which); }

  void parse_simple_body(Stmt& s, const char* end) {
    s.kind = StmtKind::body;
    expect_block_end();
    std::string which;
    s.bodies.push_back(body_until({end}, which));
    expect_block_end();
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = accept_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_identifier());
    } while (accept_op(","));
    if (paren) expect_op(")");
    return names;
  }

  void parse_for(Stmt& s) {
    s.kind = StmtKind::for_;
    s.names = parse_targets();
    expect_name("in");
    s.exprs.push_back(parse_tuple(false));
    s.exprs.push_back(accept_name("if") ? parse_tuple(true) : nullptr);
    if (is_name("recursive")) error("recursive loops are not supported");
    expect_block_end();
    std::string which;
    ++loop_depth_;
    s.bodies.push_back(body_until({"endfor", "else"}, which));
    --loop_depth_;
    if (which == "else") {
      expect_block_end();
      s.bodies.push_back(body_until({"endfor"}, which));
    }
    expect_block_end();
  }

  void parse_if(Stmt& s) {
    s.kind = StmtKind::if_;
    s.exprs.push_back(parse_tuple(false));
    expect_block_end();
    for (;;) {
      std::string which;
      s.bodies.push_back(body_until({"elif", "else", "endif"}, which));
      if (which == "elif") {
        s.exprs.push_back(parse_tuple(false));
        expect_block_end();
      } else if (which == "else") {
        expect_block_end();
        s.bodies.push_back(body_until({"endif"}, which));
        expect_block_end();
        return;
      } else {
        expect_block_end();
        return;
      }
    }
  }

  void parse_set(Stmt& s) {
    s.kind = StmtKind::set;
    if (cur().type == Tok::name && peek().type == Tok::op && peek().text == ".") {
      s.kind = StmtKind::set_attr;
      s.names.push_back(expect_identifier());
      advance();
      s.text = expect_identifier();
      expect_op("=");
      s.exprs.push_back(parse_tuple(true));
      expect_block_end();
      return;
    }
    s.names = parse_targets();
    if (accept_op("=")) {
      s.exprs.push_back(parse_tuple(true));
      expect_block_end();
      return;
    }
    if (s.names.size() != 1) error("a set block assigns one name");
    s.exprs.push_back(nullptr);
    s.exprs.push_back(is_op("|") ? parse_filter_chain() : nullptr);
    expect_block_end();
    std::string which;
    s.bodies.push_back(body_until({"endset"}, which));
    expect_block_end();
  }

  ExprPtr parse_filter_chain() {
    ExprPtr value = node(ExprKind::placeholder, cur().line);
    while (accept_op("|")) value = parse_filter(std::move(value));
    check_tree(*value, 0);
    return value;
  }

  void parse_params(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.names.empty()) expect_op(",");
      if (is_op(")")) break;
      s.names.push_back(expect_identifier());
      s.exprs.push_back(accept_op("=") ? parse_checked() : nullptr);
    }
    expect_op(")");
  }

  void parse_macro(Stmt& s) {
    s.kind = StmtKind::macro;
    s.text = expect_identifier();
    parse_params(s);
    expect_block_end();
    std::string which;
    int saved = loop_depth_;
    loop_depth_ = 0;
    s.bodies.push_back(body_until({"endmacro"}, which));
    loop_depth_ = saved;
    if (cur().type == Tok::name) advance();  // {% endmacro name %}
    expect_block_end();
  }

  void parse_call_block(Stmt& s) {
    s.kind = StmtKind::call_block;
    Stmt params;
    if (is_op("(")) parse_params(params);
    s.names = std::move(params.names);
    auto call = parse_tuple(true);
    if (call->kind != ExprKind::call) error("expected a call in a call block");
    s.exprs.push_back(std::move(call));
    for (auto& d : params.exprs) s.exprs.push_back(std::move(d));
    expect_block_end();
    std::string which;
    s.bodies.push_back(body_until({"endcall"}, which));
    expect_block_end();
  }

  void parse_filter_block(Stmt& s) {
    s.kind = StmtKind::filter_block;
    ExprPtr value = node(ExprKind::placeholder, cur().line);
    do value = parse_filter(std::move(value));
    while (accept_op("|"));
    check_tree(*value, 0);
    s.exprs.push_back(std::move(value));
    expect_block_end();
    std::string which;
    s.bodies.push_back(body_until({"endfilter"}, which));
    expect_block_end();
  }

  void parse_with(Stmt& s) {
    s.kind = StmtKind::with;
    while (cur().type != Tok::block_end) {
      if (!s.names.empty()) expect_op(",");
      s.names.push_back(expect_identifier());
      expect_op("=");
      s.exprs.push_back(parse_checked());
    }
    expect_block_end();
    std::string which;
    s.bodies.push_back(body_until({"endwith"}, which));
    expect_block_end();
  }

  // ---- expressions ----

  // A comma-separated tuple without parentheses where the grammar allows one ({{ a, b }}, set x = a, b).
  ExprPtr parse_tuple(bool with_condexpr) {
    ExprPtr e = parse_tuple_unchecked(with_condexpr);
    check_tree(*e, 0);
    return e;
  }

  ExprPtr parse_checked() {
    ExprPtr e = parse_expression(true);
    check_tree(*e, 0);
    return e;
  }

  ExprPtr parse_tuple_unchecked(bool with_condexpr) {
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

  ExprPtr parse_expression(bool with_condexpr) {
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

  ExprPtr binary(ExprKind kind, Op op, ExprPtr l, ExprPtr r, int line) {
    auto b = node(kind, line);
    b->op = op;
    b->kids.push_back(std::move(l));
    b->kids.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      advance();
      l = binary(ExprKind::logic_or, Op::none, std::move(l), parse_and(), line);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      advance();
      l = binary(ExprKind::logic_and, Op::none, std::move(l), parse_not(), line);
    }
    return l;
  }

  ExprPtr parse_not() {
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

  Op comparison_op() {
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
  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      Op op = is_op("+") ? Op::add : Op::sub;
      int line = cur().line;
      advance();
      l = binary(ExprKind::binary, op, std::move(l), parse_concat(), line);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      advance();
      l = binary(ExprKind::binary, Op::concat, std::move(l), parse_math2(), line);
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    for (;;) {
      Op op = is_op("*") ? Op::mul : is_op("/") ? Op::div : is_op("//") ? Op::floordiv : is_op("%") ? Op::mod : Op::none;
      if (op == Op::none) return l;
      int line = cur().line;
      advance();
      l = binary(ExprKind::binary, op, std::move(l), parse_pow(), line);
    }
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      advance();
      l = binary(ExprKind::binary, Op::pow, std::move(l), parse_unary(true), line);
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr literal(Value v, int line) {
    auto e = node(ExprKind::literal, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
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

  ExprPtr parse_paren() {
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

  ExprPtr parse_list() {
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

  ExprPtr parse_dict() {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr target) {
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

  void parse_args(Expr& e) {
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
      } else {
        for (const auto& n : e.arg_names)
          if (!n.empty()) error("positional argument follows keyword argument");
      }
      e.arg_names.push_back(std::move(name));
      e.kids.push_back(parse_expression(true));
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    Nest nest(*this);
    auto c = node(ExprKind::call, cur().line);
    c->kids.push_back(std::move(callee));
    parse_args(*c);
    return c;
  }

  ExprPtr parse_filter(ExprPtr value) {
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

  ExprPtr parse_filter_expr(ExprPtr e) {
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

  ExprPtr parse_test(ExprPtr value) {
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

  std::vector<Token> toks_;
  const Limits& limits_;
  std::size_t i_ = 0;
  std::size_t depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::shared_ptr<const Program> parse_program(std::string_view source, const Limits& limits) {
  Parser parser(tokenize(source, limits), limits);
  auto program = std::make_shared<Program>();
  program->body = parser.parse_all();
  return program;
}

}  // namespace loom::compute::jinja::detail
