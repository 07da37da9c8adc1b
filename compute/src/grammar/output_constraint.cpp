#include "loom/compute/grammar/output_constraint.hpp"

#include <nlohmann/json.hpp>

namespace loom::compute::grammar {

std::string constraint_gbnf(const proto::OutputConstraint& constraint, const SchemaLimits& limits) {
  using Kind = proto::OutputConstraint::Kind;
  switch (constraint.kind) {
    case Kind::grammar:
      return constraint.text;
    case Kind::json_object:
      return json_object_gbnf();
    case Kind::json_schema:
      break;
  }
  // Parsed keeping key order, so that properties come in the order the schema gives them.
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(constraint.text, nullptr, false);
  if (schema.is_discarded()) throw SchemaError("", "", "the schema is not valid JSON");
  return json_schema_to_gbnf(schema, limits);
}

std::shared_ptr<const Grammar> compile_constraint(const proto::OutputConstraint& constraint,
                                                  const GrammarLimits& limits) {
  SchemaLimits schema_limits;
  schema_limits.max_grammar_bytes = limits.max_text_bytes;
  // A converted schema is our own text, so a GrammarError from it is the converter's fault; it is passed on
  // as is all the same, so that the client still learns which limit it met.
  return parse_gbnf(constraint_gbnf(constraint, schema_limits), limits);
}

}  // namespace loom::compute::grammar
