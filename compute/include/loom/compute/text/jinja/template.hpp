// A Jinja2 interpreter for chat templates: a model's `tokenizer.chat_template` rendered the way Hugging Face
// transformers renders it (Python's jinja2 3.1 in an immutable sandbox, trim_blocks and lstrip_blocks on,
// loop controls, `tojson` as json.dumps, the globals `raise_exception` and `strftime_now`), byte for byte.
//
// Templates come from downloaded model files (and maybe from clients), so everything the template author
// controls is bounded by Limits: source size, parser nesting, macro recursion, evaluation steps and output
// size. Every failure is a TemplateError; nothing a template does may crash or hang the process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace loom::compute::jinja {

struct Limits {
  std::size_t max_source_bytes = 1 << 20;
  std::size_t max_output_bytes = 8 << 20;  // also bounds any single string or list a template builds
  std::size_t max_nesting = 256;           // parser nesting (expressions/blocks)
  std::size_t max_call_depth = 200;        // macro/call recursion -> error kind `recursion`
  // Evaluation steps -> kind `limit`: one per node evaluated and per loop iteration, and one per 8 bytes of
  // text built or written (so that what a render can hold in memory is bounded too).
  std::uint64_t max_steps = 20'000'000;
};

// syntax: malformed template (or a parse limit); raised: raise_exception(); type: what Python raises as
// TypeError (str + None, x in None, iterating None, ...); undefined: using an undefined value beyond printing
// and testing it; recursion: macro recursion or evaluation nesting too deep; limit: steps, output or value
// size; other: the rest (the sandbox refusing a mutating method, division by zero, unknown filter, ...).
enum class ErrorKind { syntax, raised, type, undefined, recursion, limit, other };

// "syntax", "raised", "type", "undefined", "recursion", "limit", "other".
const char* to_string(ErrorKind kind) noexcept;

// what() is the message; for `raised` it is exactly the template's raise_exception() argument, so that it can
// be returned to a client as is.
class TemplateError : public std::runtime_error {
 public:
  TemplateError(ErrorKind kind, std::string message, std::size_t line = 0);
  ErrorKind kind() const noexcept { return kind_; }
  std::size_t line() const noexcept { return line_; }  // 1-based source line where known, 0 otherwise

 private:
  ErrorKind kind_;
  std::size_t line_;
};

struct RenderOptions {
  // The time strftime_now() formats (local wall-clock fields, seconds resolution): given, it is broken down
  // as UTC (gmtime), so tests are reproducible; nullopt: the current local time.
  std::optional<std::chrono::sys_seconds> now;
  Limits limits;
};

namespace detail {
struct Program;
}

class Template {
 public:
  // Parses once; throws TemplateError (kind syntax, with line) for malformed text or when a parse limit is
  // exceeded.
  static std::shared_ptr<const Template> parse(std::string_view source, const Limits& limits = {});

  // Thread-safe (const, no shared mutable state). `variables` must be a JSON object; each key is a template
  // variable (object -> dict keeping insertion order, array -> list, null -> none, integers -> int,
  // floats -> float). A variable that is absent is undefined. Throws TemplateError.
  std::string render(const nlohmann::ordered_json& variables, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const detail::Program> program) : program_(std::move(program)) {}

  std::shared_ptr<const detail::Program> program_;
};

}  // namespace loom::compute::jinja
