// Jinja statements (parser.hpp, parser_impl.hpp): for/if/set/macro/call/filter/with/break/continue/
// generation, with their bodies up to the matching end tag.
#include "parser.hpp"

#include "parser_impl.hpp"

namespace loom::compute::jinja::detail {

Body Parser::parse_body(std::initializer_list<const char*> ends, std::string& which) {
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

std::unique_ptr<Stmt> Parser::parse_statement() {
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

void Parser::parse_simple_body(Stmt& s, const char* end) {
  s.kind = StmtKind::body;
  expect_block_end();
  std::string which;
  s.bodies.push_back(body_until({end}, which));
  expect_block_end();
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  bool paren = accept_op("(");
  do {
    if (paren && is_op(")")) break;
    names.push_back(expect_identifier());
  } while (accept_op(","));
  if (paren) expect_op(")");
  return names;
}

void Parser::parse_for(Stmt& s) {
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

void Parser::parse_if(Stmt& s) {
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

void Parser::parse_set(Stmt& s) {
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

ExprPtr Parser::parse_filter_chain() {
  ExprPtr value = node(ExprKind::placeholder, cur().line);
  while (accept_op("|")) value = parse_filter(std::move(value));
  check_tree(*value, 0);
  return value;
}

void Parser::parse_params(Stmt& s) {
  expect_op("(");
  while (!is_op(")")) {
    if (!s.names.empty()) expect_op(",");
    if (is_op(")")) break;
    s.names.push_back(expect_identifier());
    s.exprs.push_back(accept_op("=") ? parse_checked() : nullptr);
  }
  expect_op(")");
}

void Parser::parse_macro(Stmt& s) {
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

void Parser::parse_call_block(Stmt& s) {
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

void Parser::parse_filter_block(Stmt& s) {
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

void Parser::parse_with(Stmt& s) {
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

std::shared_ptr<const Program> parse_program(std::string_view source, const Limits& limits) {
  Parser parser(tokenize(source, limits), limits);
  auto program = std::make_shared<Program>();
  program->body = parser.parse_all();
  return program;
}

}  // namespace loom::compute::jinja::detail
