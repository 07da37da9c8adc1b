// The parsed form of a template (internal): expression and statement nodes, built once by the parser and
// only read while rendering, so one parsed Template serves any number of concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "value.hpp"

namespace loom::compute::jinja::detail {

enum class ExprKind : std::uint8_t {
  literal,      // value
  name,         // name
  list,         // kids
  tuple,        // kids
  dict,         // kids: key, value, key, value...
  attr,         // kids[0] . name
  item,         // kids[0] [ kids[1] ]
  slice,        // kids[0] [ kids[1] : kids[2] : kids[3] ] (null kids: omitted)
  call,         // kids[0] ( kids[1..] ), arg_names parallel to the arguments ("" positional)
  filter,       // kids[0] | name ( kids[1..] ); kids[0] null: the value of a filter/set block
  test,         // kids[0] is [not] name ( kids[1..] )
  unary,        // op kids[0]: '-', '+', 'not'
  binary,       // kids[0] op kids[1]
  logic_and,    // kids[0] and kids[1]
  logic_or,     // kids[0] or kids[1]
  conditional,  // kids[1] if kids[0] else kids[2] (kids[2] null: undefined)
  placeholder,  // the captured body of a filter/set block
  compare,      // kids[0] ops[0] kids[1] ops[1] kids[2]...: a chained comparison (a < b < c)
};

enum class Op : std::uint8_t { none, add, sub, mul, div, floordiv, mod, pow, concat, eq, ne, lt, le, gt, ge, in, not_in, neg, pos, not_ };

struct Expr {
  ExprKind kind = ExprKind::literal;
  Op op = Op::none;
  bool negated = false;  // `is not`
  int line = 0;
  std::string name;
  Value value;
  std::vector<std::unique_ptr<Expr>> kids;
  std::vector<std::string> arg_names;  // call/filter/test arguments: keyword names, "" for positional
  std::vector<Op> ops;                 // compare
};
using ExprPtr = std::unique_ptr<Expr>;

enum class StmtKind : std::uint8_t {
  text,        // text
  output,      // {{ exprs[0] }}
  if_,         // exprs = conditions, bodies[i] their branches, one more body = else
  for_,        // names = targets, exprs[0] = iterable, exprs[1] = filter (or null), bodies[0], bodies[1] = else
  set,         // names = targets, exprs[0] = value; or bodies[0] captured with exprs[1] a filter (or null)
  set_attr,    // names[0] . text = exprs[0]
  macro,       // text = name, names = parameters, exprs = defaults (null: none), bodies[0]
  call_block,  // exprs[0] = the call, names = caller parameters, bodies[0] = caller body
  filter_block,  // exprs[0] = filter chain over the placeholder, bodies[0]
  with,        // names/exprs = assignments, bodies[0]
  break_,
  continue_,
  body,        // bodies[0] rendered as is ({% generation %})
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind = StmtKind::text;
  int line = 0;
  std::string text;
  std::vector<std::string> names;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

struct Program {
  Body body;
};

}  // namespace loom::compute::jinja::detail
