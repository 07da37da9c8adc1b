// Statement execution and expression evaluation (evaluator.hpp).
#include "evaluator.hpp"

#include <optional>

#include "builtins.hpp"

namespace loom::compute::jinja::detail {

const Value* Scope::find(std::string_view name) const {
  for (const auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars)
    if (k == name) {
      v = std::move(value);
      return;
    }
  vars.emplace_back(name, std::move(value));
}

// Statements and expressions are each bounded by the parser, but a macro recursing through deeply nested
// bodies multiplies them; this bounds the native recursion of one render as a whole.
struct NativeDepth {
  Renderer& r;
  explicit NativeDepth(Renderer& renderer) : r(renderer) {
    if (++r.native_depth_ > r.max_native_depth_) {
      --r.native_depth_;
      fail(ErrorKind::recursion, "template evaluation is nested too deeply");
    }
  }
  ~NativeDepth() { --r.native_depth_; }
};

Renderer::Renderer(const RenderOptions& options)
    : options_(options), max_native_depth_(options.limits.max_call_depth * 8 + options.limits.max_nesting * 4) {}

void Renderer::step_limit() const {
  fail(ErrorKind::limit, "template evaluation exceeded the limit of " + std::to_string(options_.limits.max_steps) + " steps");
}

void Renderer::track_namespace(const std::shared_ptr<Dict>& ns) {
  namespaces_.push_back(ns);
  if (namespaces_.size() < 2 * namespaces_compacted_ + 64) return;
  std::erase_if(namespaces_, [](const std::weak_ptr<Dict>& w) { return w.expired(); });
  namespaces_compacted_ = namespaces_.size();
}

void Renderer::check_size(std::size_t bytes) {
  step(bytes / kBytesPerStep);
  check_bound(bytes);
}

void Renderer::check_bound(std::size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes)
    fail(ErrorKind::limit, "template built a value of " + std::to_string(bytes) + " bytes, over the output limit of " +
                               std::to_string(options_.limits.max_output_bytes));
}

std::tm Renderer::now() const {
  std::tm tm{};
  if (options_.now) {
    std::time_t t = std::chrono::system_clock::to_time_t(*options_.now);
    gmtime_r(&t, &tm);
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  return tm;
}

std::string Renderer::render(const Program& program, const nlohmann::ordered_json& variables) {
  if (!variables.is_object()) fail(ErrorKind::type, "template variables must be a JSON object");
  root_ = std::make_shared<Scope>();
  for (auto it = variables.begin(); it != variables.end(); ++it) root_->set(it.key(), from_json(it.value()));
  scope_ = root_;
  std::string out;
  out_ = &out;
  struct Cleanup {
    Renderer& r;
    // Break the cycles namespaces and macros (through the scopes they were defined in) may form.
    ~Cleanup() {
      r.scope_.reset();
      if (r.root_) r.root_->vars.clear();
      r.root_.reset();
      for (auto& weak : r.namespaces_)
        if (auto ns = weak.lock()) ns->entries.clear();
      r.namespaces_.clear();
    }
  } cleanup{*this};
  exec_body(program.body);
  return out;
}

void Renderer::write(std::string_view text) {
  step(text.size() / kBytesPerStep);
  if (out_->size() + text.size() > options_.limits.max_output_bytes)
    fail(ErrorKind::limit, "template output exceeds the limit of " + std::to_string(options_.limits.max_output_bytes) + " bytes");
  out_->append(text);
}

Flow Renderer::exec_body(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Flow Renderer::exec(const Stmt& s) {
  step();
  NativeDepth depth(*this);
  try {
    switch (s.kind) {
      case StmtKind::text: write(s.text); return Flow::normal;
      case StmtKind::output: {
        Value v = eval(*s.exprs[0]);
        if (v.is_string()) write(v.str());
        else write(to_str(v));
        return Flow::normal;
      }
      case StmtKind::if_: return exec_if(s);
      case StmtKind::for_: return exec_for(s);
      case StmtKind::set: exec_set(s); return Flow::normal;
      case StmtKind::set_attr: exec_set_attr(s); return Flow::normal;
      case StmtKind::macro: exec_macro(s); return Flow::normal;
      case StmtKind::call_block: exec_call_block(s); return Flow::normal;
      case StmtKind::filter_block: {
        Value saved = placeholder_;
        placeholder_ = Value::from(capture(s.bodies[0], std::make_shared<Scope>(Scope{scope_, {}})));
        Value v = eval(*s.exprs[0]);
        placeholder_ = saved;
        write(to_str(v));
        return Flow::normal;
      }
      case StmtKind::with: return exec_with(s);
      case StmtKind::break_: return Flow::break_;
      case StmtKind::continue_: return Flow::continue_;
      case StmtKind::body: return exec_body(s.bodies[0]);
    }
  } catch (const TemplateError& e) {
    if (e.line() != 0 || s.line == 0) throw;
    throw TemplateError(e.kind(), e.what(), static_cast<std::size_t>(s.line));
  }
  return Flow::normal;
}

Flow Renderer::exec_if(const Stmt& s) {
  for (std::size_t i = 0; i < s.exprs.size(); ++i)
    if (truthy(eval(*s.exprs[i]))) return exec_body(s.bodies[i]);
  if (s.bodies.size() > s.exprs.size()) return exec_body(s.bodies.back());
  return Flow::normal;
}

namespace {
// The loop object's fields; get_attr computes index, first, last, previtem... from them.
std::shared_ptr<Dict> make_loop(const Value& items, std::int64_t length) {
  auto loop = std::make_shared<Dict>();
  loop->is_loop = true;
  loop->entries.emplace_back(Value::from(std::string("index0")), Value::from_int(0));
  loop->entries.emplace_back(Value::from(std::string("length")), Value::from_int(length));
  loop->entries.emplace_back(Value::from(std::string("items")), items);
  return loop;
}
}  // namespace

// What a for loop iterates: a range as is (never materialised), anything else as a list, filtered by the
// loop's `if` (evaluated with the targets bound; the loop variables then count the kept items).
std::pair<Value, std::int64_t> Renderer::loop_items(const Stmt& s) {
  Value iterable = eval(*s.exprs[0]);
  const Expr* filter = s.exprs[1].get();
  if (iterable.kind == Kind::range && !filter) return {iterable, iterable.range().size()};
  std::vector<Value> all = iterate(*this, iterable);
  if (filter) {
    std::vector<Value> kept;
    auto saved = scope_;
    struct Restore {
      Renderer& r;
      std::shared_ptr<Scope> s;
      ~Restore() { r.scope_ = s; }
    } restore{*this, saved};
    for (auto& item : all) {
      scope_ = std::make_shared<Scope>(Scope{saved, {}});
      bind_targets(*scope_, s.names, item);
      if (truthy(eval(*filter))) kept.push_back(std::move(item));
    }
    all = std::move(kept);
  }
  auto length = static_cast<std::int64_t>(all.size());
  return {Value::from(Array{std::move(all), false}), length};
}

Flow Renderer::exec_for(const Stmt& s) {
  auto [items, length] = loop_items(s);
  auto loop = make_loop(items, length);
  Value loop_value = Value::from(loop);
  auto outer = scope_;
  struct Restore {
    Renderer& r;
    std::shared_ptr<Scope> s;
    ~Restore() { r.scope_ = s; }
  } restore{*this, outer};
  // Each iteration gets a fresh scope; the previous one is reused when nothing can still see it (no macro or
  // call block defined during the iteration captured it).
  // A reused scope keeps its first entries (the targets and `loop`, bound first) and drops what the body set.
  std::shared_ptr<Scope> iteration;
  std::uint64_t closures_seen = closures_defined_;
  std::size_t bound = 0;
  for (std::int64_t i = 0; i < length; ++i) {
    step();
    loop->entries[0].second = Value::from_int(i);
    scope_.reset();
    const bool reuse = iteration && iteration.use_count() == 1 && closures_defined_ == closures_seen;
    if (reuse) {
      iteration->vars.resize(bound);
    } else {
      iteration = std::make_shared<Scope>(Scope{outer, {}});
      closures_seen = closures_defined_;
    }
    scope_ = iteration;
    Value item = items.kind == Kind::range ? Value::from_int(items.range().at(i)) : items.array().items[static_cast<std::size_t>(i)];
    bind_targets(*scope_, s.names, item);
    if (!reuse) {
      scope_->vars.emplace_back("loop", loop_value);
      bound = scope_->vars.size();
    }
    if (exec_body(s.bodies[0]) == Flow::break_) break;
  }
  scope_ = outer;
  if (length == 0 && s.bodies.size() > 1) {
    scope_ = std::make_shared<Scope>(Scope{outer, {}});
    exec_body(s.bodies[1]);
  }
  return Flow::normal;
}

void Renderer::bind_targets(Scope& scope, const std::vector<std::string>& names, const Value& value) {
  if (names.size() == 1) {
    scope.set(names[0], value);
    return;
  }
  std::vector<Value> parts = iterate(*this, value);
  if (value.is_undefined()) fail(ErrorKind::undefined, "cannot unpack an undefined value");
  if (parts.size() != names.size())
    fail(ErrorKind::type, parts.size() > names.size() ? "too many values to unpack (expected " + std::to_string(names.size()) + ")"
                                                      : "not enough values to unpack (expected " + std::to_string(names.size()) +
                                                            ", got " + std::to_string(parts.size()) + ")");
  for (std::size_t i = 0; i < names.size(); ++i) scope.set(names[i], parts[i]);
}

std::string Renderer::capture(const Body& body, std::shared_ptr<Scope> scope) {
  std::string text;
  std::string* saved_out = out_;
  auto saved_scope = scope_;
  out_ = &text;
  scope_ = std::move(scope);
  struct Restore {
    Renderer& r;
    std::string* out;
    std::shared_ptr<Scope> s;
    ~Restore() {
      r.out_ = out;
      r.scope_ = s;
    }
  } restore{*this, saved_out, saved_scope};
  exec_body(body);
  return text;
}

void Renderer::exec_set(const Stmt& s) {
  step(scope_->vars.size() / 16);
  if (s.exprs[0]) {
    Value v = eval(*s.exprs[0]);
    bind_targets(*scope_, s.names, v);
    return;
  }
  // {% set x %}...{% endset %}: the body renders in the current scope (jinja2 gives it no scope of its own).
  std::string text = capture(s.bodies[0], scope_);
  Value v = Value::from(std::move(text));
  if (s.exprs[1]) {
    Value saved = placeholder_;
    placeholder_ = v;
    v = eval(*s.exprs[1]);
    placeholder_ = saved;
  }
  scope_->set(s.names[0], v);
}

void Renderer::exec_set_attr(const Stmt& s) {
  Value target = lookup(s.names[0]);
  if (target.kind != Kind::dict || !target.dict().is_namespace)
    fail(ErrorKind::type, "cannot assign attribute on non-namespace object");
  Value v = eval(*s.exprs[0]);
  step(target.dict().entries.size() / 16);
  target.mutable_dict().set(Value::from(s.text), std::move(v));
}

void Renderer::exec_macro(const Stmt& s) {
  ++closures_defined_;
  std::weak_ptr<Scope> defined_in = scope_;
  const Stmt* macro = &s;
  Function f;
  f.name = s.text;
  f.call = [macro, defined_in](Renderer& r, Args& args) {
    auto scope = defined_in.lock();
    return r.call_macro(*macro, scope ? scope : r.root_, args);
  };
  scope_->set(s.text, Value::from(std::move(f)));
}

Value Renderer::call_macro(const Stmt& macro, const std::shared_ptr<Scope>& defined_in, Args& args) {
  if (call_depth_ >= options_.limits.max_call_depth)
    fail(ErrorKind::recursion, "maximum recursion depth exceeded in macro '" + macro.text + "' (limit " +
                                   std::to_string(options_.limits.max_call_depth) + ")");
  // Binding matches names by linear scans: quadratic in the arguments and parameters, so paid for as such.
  const std::uint64_t names = args.positional.size() + args.keyword.size() + macro.names.size();
  step(names * names / 16);
  ++call_depth_;
  struct Depth {
    std::size_t& d;
    ~Depth() { --d; }
  } depth{call_depth_};
  auto scope = std::make_shared<Scope>(Scope{defined_in, {}});
  Array varargs;
  varargs.tuple = true;
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < macro.names.size()) scope->set(macro.names[i], args.positional[i]);
    else varargs.items.push_back(args.positional[i]);
  }
  Dict kwargs;
  for (auto& [k, v] : args.keyword) {
    bool is_param = false;
    for (const auto& p : macro.names) is_param = is_param || p == k;
    if (is_param || k == "caller") scope->set(k, v);
    else kwargs.set(Value::from(k), v);
  }
  scope->set("varargs", Value::from(std::move(varargs)));
  scope->set("kwargs", Value::from(std::move(kwargs)));
  // Missing parameters take their defaults, evaluated now, in the macro's scope (they may use earlier ones).
  auto saved = scope_;
  scope_ = scope;
  try {
    for (std::size_t i = 0; i < macro.names.size(); ++i) {
      if (scope->find(macro.names[i])) continue;
      scope->set(macro.names[i], macro.exprs[i] ? eval(*macro.exprs[i]) : Value::undefined(macro.names[i]));
    }
  } catch (...) {
    scope_ = saved;
    throw;
  }
  scope_ = saved;
  return Value::from(capture(macro.bodies[0], scope));
}

void Renderer::exec_call_block(const Stmt& s) {
  ++closures_defined_;
  const Stmt* block = &s;
  std::weak_ptr<Scope> defined_in = scope_;
  Function caller;
  caller.name = "caller";
  caller.call = [block, defined_in](Renderer& r, Args& args) {
    auto parent = defined_in.lock();
    auto scope = std::make_shared<Scope>(Scope{parent ? parent : r.root_, {}});
    for (std::size_t i = 0; i < block->names.size(); ++i) {
      Value v = args.get(i, block->names[i], Value::undefined(block->names[i]));
      if (v.is_undefined() && i + 1 < block->exprs.size() && block->exprs[i + 1]) v = r.eval(*block->exprs[i + 1]);
      scope->set(block->names[i], v);
    }
    return Value::from(r.capture(block->bodies[0], scope));
  };
  const Expr& call = *s.exprs[0];
  Value callee = eval(*call.kids[0]);
  Args args = eval_args(call, 1);
  args.keyword.emplace_back("caller", Value::from(std::move(caller)));
  write(to_str(this->call(callee, args, "call block")));
}

Flow Renderer::exec_with(const Stmt& s) {
  auto outer = scope_;
  auto inner = std::make_shared<Scope>(Scope{outer, {}});
  for (std::size_t i = 0; i < s.names.size(); ++i) inner->set(s.names[i], eval(*s.exprs[i]));
  scope_ = inner;
  struct Restore {
    Renderer& r;
    std::shared_ptr<Scope> s;
    ~Restore() { r.scope_ = s; }
  } restore{*this, outer};
  return exec_body(s.bodies[0]);
}

// Names are found by a linear scan (scopes are small); a template that defines very many names pays for
// scanning them in steps.
Value Renderer::lookup(const std::string& name) {
  std::size_t scanned = 0;
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    scanned += s->vars.size();
    if (const Value* v = s->find(name)) {
      step(scanned / 16);
      return *v;
    }
  }
  step(scanned / 16);
  Value g = global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined(name);
}

Value Renderer::call(const Value& callee, Args& args, const std::string& what) {
  if (callee.kind == Kind::function) return callee.function().call(*this, args);
  if (callee.is_undefined())
    fail(ErrorKind::undefined, "'" + (callee.undefined_name().empty() ? what : callee.undefined_name()) + "' is undefined");
  fail(ErrorKind::type, "'" + type_name(callee) + "' object is not callable");
}

Args Renderer::eval_args(const Expr& e, std::size_t first) {
  Args args;
  for (std::size_t i = first; i < e.kids.size(); ++i) {
    const std::string& name = e.arg_names[i - first];
    if (name.empty()) args.positional.push_back(eval(*e.kids[i]));
    else args.keyword.emplace_back(name, eval(*e.kids[i]));
  }
  return args;
}

Value Renderer::eval_call(const Expr& e) {
  const Expr& callee = *e.kids[0];
  if (callee.kind == ExprKind::attr) {
    Value obj = eval(*callee.kids[0]);
    Args args = eval_args(e, 1);
    if (auto v = call_method(*this, obj, callee.name, args)) return std::move(*v);
    Value f = get_attr(*this, obj, callee.name);
    return call(f, args, callee.name);
  }
  Value f = eval(callee);
  Args args = eval_args(e, 1);
  return call(f, args, callee.kind == ExprKind::name ? callee.name : "object");
}

Value Renderer::eval(const Expr& e) {
  step();
  NativeDepth depth(*this);
  switch (e.kind) {
    case ExprKind::literal: return e.value;
    case ExprKind::name: return lookup(e.name);
    case ExprKind::placeholder: return placeholder_;
    case ExprKind::list:
    case ExprKind::tuple: {
      Array a;
      a.tuple = e.kind == ExprKind::tuple;
      a.items.reserve(e.kids.size());
      for (const auto& k : e.kids) a.items.push_back(eval(*k));
      return Value::from(std::move(a));
    }
    case ExprKind::dict: {
      Dict d;
      for (std::size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        step(d.entries.size());  // each insertion looks for the key: quadratic work, counted
        Value k = eval(*e.kids[i]);
        d.set(std::move(k), eval(*e.kids[i + 1]));
      }
      return Value::from(std::move(d));
    }
    case ExprKind::attr: return get_attr(*this, eval(*e.kids[0]), e.name);
    case ExprKind::item: {
      Value obj = eval(*e.kids[0]);
      return get_item(*this, obj, eval(*e.kids[1]));
    }
    case ExprKind::slice: {
      Value obj = eval(*e.kids[0]);
      Value a = e.kids[1] ? eval(*e.kids[1]) : Value::none();
      Value b = e.kids[2] ? eval(*e.kids[2]) : Value::none();
      Value c = e.kids[3] ? eval(*e.kids[3]) : Value::none();
      return get_slice(*this, obj, a, b, c);
    }
    case ExprKind::call: return eval_call(e);
    case ExprKind::filter: {
      Value v = e.kids[0] ? eval(*e.kids[0]) : placeholder_;
      Args args = eval_args(e, 1);
      return call_filter(*this, e.name, v, args);
    }
    case ExprKind::test: {
      Value v = eval(*e.kids[0]);
      Args args = eval_args(e, 1);
      return Value::from(call_test(*this, e.name, v, args) != e.negated);
    }
    case ExprKind::unary: {
      Value v = eval(*e.kids[0]);
      if (e.op == Op::not_) return Value::from(!truthy(v));
      return arithmetic(*this, e.op, v, Value());
    }
    case ExprKind::binary: return eval_binary(e);
    case ExprKind::compare: return eval_compare(e);
    case ExprKind::logic_and: {
      Value l = eval(*e.kids[0]);
      return truthy(l) ? eval(*e.kids[1]) : l;
    }
    case ExprKind::logic_or: {
      Value l = eval(*e.kids[0]);
      return truthy(l) ? l : eval(*e.kids[1]);
    }
    case ExprKind::conditional:
      if (truthy(eval(*e.kids[0]))) return eval(*e.kids[1]);
      return e.kids[2] ? eval(*e.kids[2]) : Value::undefined();
  }
  return Value();
}

namespace {
// Comparison operators; nullopt for the others.
std::optional<bool> comparison(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::eq: return equals(a, b);
    case Op::ne: return !equals(a, b);
    case Op::lt: return compare(a, b) < 0;
    case Op::le: return compare(a, b) <= 0;
    case Op::gt: return compare(a, b) > 0;
    case Op::ge: return compare(a, b) >= 0;
    case Op::in: return contains(b, a);
    case Op::not_in: return !contains(b, a);
    default: return std::nullopt;
  }
}
}  // namespace

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.kids[0]);
  for (std::size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.kids[i + 1]);
    step(scan_cost(left) + scan_cost(right));
    if (!*comparison(e.ops[i], left, right)) return Value::from(false);
    left = std::move(right);
  }
  return Value::from(true);
}

Value Renderer::eval_binary(const Expr& e) {
  Value a = eval(*e.kids[0]);
  Value b = eval(*e.kids[1]);
  step(scan_cost(a) + scan_cost(b));
  if (auto c = comparison(e.op, a, b)) return Value::from(*c);
  switch (e.op) {
    case Op::concat: {
      std::string s = to_str(a);
      append_str(s, b);
      check_size(s.size());
      return Value::from(std::move(s));
    }
    default: return arithmetic(*this, e.op, a, b);
  }
}

}  // namespace loom::compute::jinja::detail
