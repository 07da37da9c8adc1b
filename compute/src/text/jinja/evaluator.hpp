// Rendering one parsed template (internal): a Renderer holds everything one render() call mutates (scopes,
// output buffers, step and depth counters), so a parsed Program is shared read-only between threads.
//
// Scoping follows jinja2: the template's variables live in the root scope; every loop iteration and every
// macro call opens a scope of its own (a `set` there is invisible to the next iteration and to the caller);
// `if` opens none. Names not found in any scope fall back to the globals (range, namespace, dict,
// raise_exception, strftime_now). A macro sees its arguments, then the scope it was defined in, read when it
// is called.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ast.hpp"
#include "value.hpp"

namespace loom::compute::jinja::detail {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

enum class Flow : std::uint8_t { normal, break_, continue_ };

class Renderer {
 public:
  explicit Renderer(const RenderOptions& options);
  std::string render(const Program& program, const nlohmann::ordered_json& variables);

  // For the builtins.
  const Limits& limits() const { return options_.limits; }
  void step(std::uint64_t n = 1) {
    steps_ += n;
    if (steps_ > options_.limits.max_steps) step_limit();
  }
  // Strings and lists a template builds are bounded like the output, and building them costs steps in
  // proportion to their size (one per kBytesPerStep), so that the memory a render can hold at once is
  // bounded too (retaining many large strings means building each of them).
  static constexpr std::size_t kBytesPerStep = 8;
  void check_size(std::size_t bytes);
  // The bound alone, without the cost: for a value still growing (check_size it once when done).
  void check_bound(std::size_t bytes) const;
  Value call(const Value& callee, Args& args, const std::string& what);
  std::tm now() const;
  // namespace() objects may form cycles (ns.self = ns); render() empties them all when it ends.
  void track_namespace(const std::shared_ptr<Dict>& ns);

 private:
  [[noreturn]] void step_limit() const;
  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  void write(std::string_view text);
  Flow exec_if(const Stmt& s);
  Flow exec_for(const Stmt& s);
  std::pair<Value, std::int64_t> loop_items(const Stmt& s);
  void exec_set(const Stmt& s);
  void exec_set_attr(const Stmt& s);
  void exec_macro(const Stmt& s);
  void exec_call_block(const Stmt& s);
  Flow exec_with(const Stmt& s);
  std::string capture(const Body& body, std::shared_ptr<Scope> scope);
  void bind_targets(Scope& scope, const std::vector<std::string>& names, const Value& value);
  Value call_macro(const Stmt& macro, const std::shared_ptr<Scope>& defined_in, Args& args);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Args eval_args(const Expr& e, std::size_t first);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value lookup(const std::string& name);

  RenderOptions options_;
  std::uint64_t steps_ = 0;
  std::size_t call_depth_ = 0;
  std::uint64_t closures_defined_ = 0;  // macros and call blocks defined so far (they capture their scope)
  std::size_t native_depth_ = 0;  // exec() and eval() frames on the stack
  std::size_t max_native_depth_ = 0;
  friend struct NativeDepth;
  std::string* out_ = nullptr;
  std::shared_ptr<Scope> scope_;
  std::shared_ptr<Scope> root_;
  Value placeholder_;
  std::vector<std::weak_ptr<Dict>> namespaces_;  // expired ones dropped as it grows
  std::size_t namespaces_compacted_ = 0;
};

}  // namespace loom::compute::jinja::detail
