// A request's OutputConstraint (proto/sampling_params.hpp: GBNF text, a JSON Schema, or any JSON object)
// compiled into the Grammar that the token masks run on. The session compiles it once to refuse a bad one
// before the request is accepted; the backend compiles it again (cached by text) for the sequences it runs.
#pragma once

#include <memory>
#include <string>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/json_schema.hpp"
#include "loom/proto/sampling_params.hpp"

namespace loom::compute::grammar {

// The GBNF text of the constraint: the grammar kind as given, a schema converted, the JSON-object grammar.
// Throws SchemaError for a schema the converter refuses (a json_schema text that is not JSON too).
std::string constraint_gbnf(const proto::OutputConstraint& constraint, const SchemaLimits& limits = {});

// The compiled grammar. Throws GrammarError (the grammar kind: its line and column) or SchemaError.
std::shared_ptr<const Grammar> compile_constraint(const proto::OutputConstraint& constraint,
                                                  const GrammarLimits& limits = {});

}  // namespace loom::compute::grammar
