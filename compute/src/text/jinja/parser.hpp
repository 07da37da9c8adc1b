// Tokens to the AST (internal): Jinja's statement set as chat templates use it (for/if/set/macro/call/
// filter/with/break/continue/generation) and its full expression grammar, with nesting bounded by
// Limits::max_nesting so that no source can drive the recursive descent into a stack overflow.
#pragma once

#include <memory>
#include <string_view>

#include "ast.hpp"

namespace loom::compute::jinja::detail {

// Throws TemplateError (syntax, with the line) for malformed text and when a limit is exceeded.
std::shared_ptr<const Program> parse_program(std::string_view source, const Limits& limits);

}  // namespace loom::compute::jinja::detail
