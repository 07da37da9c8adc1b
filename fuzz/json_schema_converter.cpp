// The JSON Schema to GBNF converter on arbitrary input. The input is JSON text (inputs that are not JSON are
// skipped); it is converted under small SchemaLimits. Properties: json_schema_to_gbnf returns or throws
// SchemaError, nothing else, and the error's text holds its message; a grammar it returns compiles with
// parse_gbnf under GrammarLimits sized from the SchemaLimits (a GrammarError there is a converter bug: the
// converter counts what parse_gbnf makes of its text), and accepts no empty text (every JSON value has a
// character).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/grammar_state.hpp"
#include "loom/compute/grammar/json_schema.hpp"

using namespace loom::compute::grammar;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const nlohmann::json schema = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  SchemaLimits limits;
  limits.max_depth = 32;
  limits.max_rules = 512;
  limits.max_repetition = 100;
  limits.max_pattern_bytes = 512;
  limits.max_grammar_bytes = 64 * 1024;
  std::string gbnf;
  try {
    gbnf = json_schema_to_gbnf(schema, limits);
  } catch (const SchemaError& e) {
    loom::fuzz::check(std::string_view(e.what()).find(e.message()) != std::string_view::npos, "error text holds its message");
    return 0;
  }
  loom::fuzz::check(gbnf.size() <= limits.max_grammar_bytes, "the grammar is within max_grammar_bytes");
  GrammarLimits grammar_limits;
  grammar_limits.max_text_bytes = limits.max_grammar_bytes;
  grammar_limits.max_rules = limits.max_rules;
  grammar_limits.max_elements = limits.max_grammar_bytes + 8 * limits.max_rules;
  grammar_limits.max_repetition = std::max<std::uint32_t>(limits.max_repetition, 32);
  grammar_limits.max_nesting = limits.max_depth;
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = parse_gbnf(gbnf, grammar_limits);
  } catch (const GrammarError& e) {
    loom::fuzz::property_failed(std::string("the converter's grammar does not compile: ") + e.what() + "\n" + gbnf);
  }
  try {
    GrammarState state(grammar);
    loom::fuzz::check(!state.can_end(), "the empty text is not a JSON value");
  } catch (const GrammarLimitError&) {
    // A deep grammar stopped by its run-time limits: the documented outcome.
  }
  return 0;
}
