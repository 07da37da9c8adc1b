// The public face of the interpreter (template.hpp): parse once, render many times, concurrently.
#include "loom/compute/text/jinja/template.hpp"

#include "evaluator.hpp"
#include "parser.hpp"

namespace loom::compute::jinja {

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::syntax: return "syntax";
    case ErrorKind::raised: return "raised";
    case ErrorKind::type: return "type";
    case ErrorKind::undefined: return "undefined";
    case ErrorKind::recursion: return "recursion";
    case ErrorKind::limit: return "limit";
    case ErrorKind::other: return "other";
  }
  return "other";
}

TemplateError::TemplateError(ErrorKind kind, std::string message, std::size_t line)
    : std::runtime_error(std::move(message)), kind_(kind), line_(line) {}

std::shared_ptr<const Template> Template::parse(std::string_view source, const Limits& limits) {
  return std::shared_ptr<const Template>(new Template(detail::parse_program(source, limits)));
}

std::string Template::render(const nlohmann::ordered_json& variables, const RenderOptions& options) const {
  detail::Renderer renderer(options);
  try {
    return renderer.render(*program_, variables);
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError(ErrorKind::limit, "out of memory while rendering the template");
  } catch (const std::exception& e) {
    throw TemplateError(ErrorKind::other, e.what());
  }
}

}  // namespace loom::compute::jinja
