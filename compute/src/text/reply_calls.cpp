// The per-family scanners of call groups (reply_scan.hpp): one group is what one opening marker starts
// (one call, or a JSON list of calls for the list families), up to its closing marker.
#include <nlohmann/json.hpp>

#include "reply_scan.hpp"

namespace loom::compute::reply_detail {
namespace {

// The keys of a call written as a JSON object.
struct CallKeys {
  std::string_view name;
  std::vector<std::string_view> arguments;
  std::vector<std::string_view> others;  // allowed and ignored (ids, "type")
};

const CallKeys kNameArguments{"name", {"arguments"}, {"id", "type"}};
const CallKeys kLlamaKeys{"name", {"parameters", "arguments"}, {"type"}};
const CallKeys kCommandRKeys{"tool_name", {"parameters"}, {"tool_call_id"}};

bool contains(const std::vector<std::string_view>& list, std::string_view key) {
  for (auto k : list) if (k == key) return true;
  return false;
}

struct ObjScan {
  Scan status;
  std::size_t end;
  ScannedCall call;
};

// A string holding the arguments object: decoded, and valid only when it is exactly one JSON object.
bool decode_string_arguments(std::string_view token, std::string& out) {
  std::string text;
  if (!decode_json_string(token, text)) return false;
  const std::size_t begin = skip_space(text, 0);
  const JsonScan v = scan_json_value(text, begin);
  if (v.status != Scan::complete || text[begin] != '{' || skip_space(text, v.end) != text.size()) return false;
  out = text.substr(begin, v.end - begin);
  return true;
}

// The value of the arguments member at s[i]: an object (streamable as it comes) or a string holding one.
Scan scan_arguments_value(std::string_view s, std::size_t i, ObjScan& o, bool have_name, std::size_t& end) {
  if (i < s.size() && s[i] != '{' && s[i] != '"') return Scan::invalid;
  const JsonScan v = scan_buffer_value(s, i);
  end = v.end;
  if (v.status == Scan::invalid) return Scan::invalid;
  if (s[i] == '"') {
    if (v.status == Scan::complete && !decode_string_arguments(s.substr(i, v.end - i), o.call.decoded_args)) {
      return Scan::invalid;
    }
    return v.status;
  }
  const std::size_t stop = v.status == Scan::complete ? v.end : utf8_safe_end(s, s.size());
  o.call.args_begin = i;
  o.call.args_end = stop;
  o.call.streamable = have_name && !o.call.name.empty();  // an empty name never makes a call
  return v.status;
}

// {"name": "...", "arguments": {...}} with the family's keys, in any order; an unknown or repeated key makes
// it not a call at once.
ObjScan scan_call_object(std::string_view s, std::size_t pos, const CallKeys& keys) {
  ObjScan o{Scan::incomplete, s.size(), {}};
  if (pos >= s.size()) return o;
  if (s[pos] != '{') return {Scan::invalid, pos, {}};
  bool have_name = false, have_args = false;
  std::size_t i = skip_space(s, pos + 1);
  for (;;) {
    if (i >= s.size()) return o;
    if (s[i] != '"') return {Scan::invalid, i, {}};
    const JsonScan key = scan_json_value(s, i);
    if (key.status != Scan::complete) return key.status == Scan::invalid ? ObjScan{Scan::invalid, i, {}} : o;
    std::string k;
    if (!decode_json_string(s.substr(i, key.end - i), k)) return {Scan::invalid, i, {}};
    const bool is_name = k == keys.name, is_args = contains(keys.arguments, k);
    if ((is_name && have_name) || (is_args && have_args) || (!is_name && !is_args && !contains(keys.others, k))) {
      return {Scan::invalid, i, {}};
    }
    i = skip_space(s, key.end);
    if (i >= s.size()) return o;
    if (s[i] != ':') return {Scan::invalid, i, {}};
    i = skip_space(s, i + 1);
    if (i >= s.size()) return o;
    std::size_t end = 0;
    if (is_args) {
      const Scan a = scan_arguments_value(s, i, o, have_name, end);
      if (a != Scan::complete) return {a, end, a == Scan::invalid ? ScannedCall{} : o.call};
      have_args = true;
    } else {
      if (is_name && s[i] != '"') return {Scan::invalid, i, {}};
      const JsonScan v = scan_buffer_value(s, i);
      if (v.status != Scan::complete) return {v.status, v.end, v.status == Scan::invalid ? ScannedCall{} : o.call};
      if (is_name && !decode_json_string(s.substr(i, v.end - i), o.call.name)) return {Scan::invalid, i, {}};
      have_name = have_name || is_name;
      end = v.end;
    }
    i = skip_space(s, end);
    if (i >= s.size()) return o;
    if (s[i] == '}') {
      if (!have_name || !have_args || o.call.name.empty()) return {Scan::invalid, i, {}};
      o.call.complete = o.call.streamable = true;
      return {Scan::complete, i + 1, o.call};
    }
    if (s[i] != ',') return {Scan::invalid, i, {}};
    i = skip_space(s, i + 1);
  }
}

GroupScan invalid() { return {}; }
GroupScan incomplete(std::vector<ScannedCall> calls, bool closable = false) {
  return {Scan::incomplete, 0, std::move(calls), closable};
}

// A call object at s[i], added to g.calls. Returns the scan status; `end` is where it ended when complete.
Scan add_object(std::string_view s, std::size_t i, const CallKeys& keys, GroupScan& g, std::size_t& end) {
  ObjScan o = scan_call_object(s, i, keys);
  if (o.status == Scan::invalid) return Scan::invalid;
  if (o.status == Scan::complete || o.call.streamable) g.calls.push_back(std::move(o.call));
  end = o.end;
  return o.status;
}

// [obj, obj, ...] at s[i].
Scan add_array(std::string_view s, std::size_t i, const CallKeys& keys, GroupScan& g, std::size_t& end) {
  if (i >= s.size()) return Scan::incomplete;
  if (s[i] != '[') return Scan::invalid;
  for (i = skip_space(s, i + 1);; i = skip_space(s, i + 1)) {
    const Scan o = add_object(s, i, keys, g, i);
    if (o != Scan::complete) return o;
    i = skip_space(s, i);
    if (i >= s.size()) return Scan::incomplete;
    if (s[i] == ']') { end = i + 1; return Scan::complete; }
    if (s[i] != ',') return Scan::invalid;
  }
}

// Arguments written raw after a textual header: a JSON object at s[i].
Scan add_raw_arguments(std::string_view s, std::size_t i, std::string name, GroupScan& g, std::size_t& end) {
  if (i >= s.size()) return Scan::incomplete;
  if (s[i] != '{') return Scan::invalid;
  const JsonScan v = scan_buffer_value(s, i);
  if (v.status == Scan::invalid) return Scan::invalid;
  const std::size_t stop = v.status == Scan::complete ? v.end : utf8_safe_end(s, s.size());
  const bool done = v.status == Scan::complete;
  g.calls.push_back({std::move(name), i, stop, {}, done, true});
  end = v.end;
  return v.status;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// A function name at s[i] ending at a byte that cannot be part of it.
Scan scan_name(std::string_view s, std::size_t i, std::string& name, std::size_t& end) {
  std::size_t k = i;
  while (k < s.size() && is_name_char(s[k])) ++k;
  if (k >= s.size()) return Scan::incomplete;
  if (k == i) return Scan::invalid;
  name = std::string(s.substr(i, k - i));
  end = k;
  return Scan::complete;
}

// After the last call: whitespace then `literal`. Missing only because the text ended: closable.
GroupScan close_with(std::string_view s, std::size_t i, GroupScan g, std::string_view literal) {
  i = skip_space(s, i);
  const Scan m = match_literal(s, i, literal);
  if (m == Scan::invalid) return invalid();
  if (m == Scan::incomplete) return incomplete(std::move(g.calls), true);
  g.status = Scan::complete;
  g.end = i + literal.size();
  return g;
}

GroupScan complete_at(GroupScan g, std::size_t end) {
  g.status = Scan::complete;
  g.end = end;
  return g;
}

// Runs one step; a step that is not complete ends the group scan with its verdict.
#define LOOM_STEP(expr)                                           \
  do {                                                            \
    const Scan step_ = (expr);                                    \
    if (step_ == Scan::invalid) return invalid();                 \
    if (step_ == Scan::incomplete) return incomplete(std::move(g.calls)); \
  } while (0)

Scan literal_step(std::string_view s, std::size_t& i, std::string_view literal) {
  const Scan m = match_literal(s, i, literal);
  if (m == Scan::complete) i += literal.size();
  return m;
}

// A literal that may be left out: complete when present or absent, incomplete while the text could be it.
Scan optional_step(std::string_view s, std::size_t& i, std::string_view literal) {
  const Scan m = literal_step(s, i, literal);
  return m == Scan::invalid ? Scan::complete : m;
}

std::size_t after_trigger(std::string_view s, ToolCallFormat format) {
  for (const auto& t : call_triggers(format)) if (s.starts_with(t)) return t.size();
  return 0;
}

GroupScan scan_hermes(std::string_view s) {
  GroupScan g;
  std::size_t i = skip_space(s, after_trigger(s, ToolCallFormat::hermes));
  LOOM_STEP(add_object(s, i, kNameArguments, g, i));
  return close_with(s, i, std::move(g), "</tool_call>");
}

// Llama 3.1 writes a call as bare JSON or after <|python_tag|>. Llama 4's template writes the message's
// text between <|python_start|> and <|python_end|> and the calls after it, so both open a call: the empty
// wrapper "<|python_start|><|python_end|>{...}" (a call without text) is one group, and after a wrapper with
// text, <|python_end|> opens the calls (the text before it is content, <|python_start|> included).
GroupScan scan_llama3(std::string_view s) {
  GroupScan g;
  std::size_t i = skip_space(s, after_trigger(s, ToolCallFormat::llama3));
  if (s.starts_with("<|python_start|>")) {
    LOOM_STEP(optional_step(s, i, "<|python_end|>"));
    i = skip_space(s, i);
  }
  LOOM_STEP(add_object(s, i, kLlamaKeys, g, i));
  const std::size_t end = i;
  i = skip_space(s, i);
  const Scan m = match_literal(s, i, "<|python_end|>");
  if (m == Scan::incomplete) return incomplete(std::move(g.calls), true);
  return complete_at(std::move(g), m == Scan::complete ? i + 14 : end);
}

GroupScan scan_mistral(std::string_view s) {
  GroupScan g;
  std::size_t i = skip_space(s, after_trigger(s, ToolCallFormat::mistral));
  if (i < s.size() && s[i] == '[') {
    LOOM_STEP(add_array(s, i, kNameArguments, g, i));
    return complete_at(std::move(g), i);
  }
  std::string name;
  LOOM_STEP(scan_name(s, i, name, i));
  if (match_literal(s, i, "[CALL_ID]") != Scan::invalid) {
    LOOM_STEP(literal_step(s, i, "[CALL_ID]"));
    std::string id;
    LOOM_STEP(scan_name(s, i, id, i));
  }
  LOOM_STEP(literal_step(s, i, "[ARGS]"));
  LOOM_STEP(add_raw_arguments(s, skip_space(s, i), name, g, i));
  return complete_at(std::move(g), i);
}

GroupScan scan_command_r(std::string_view s) {
  GroupScan g;
  std::size_t i = skip_space(s, after_trigger(s, ToolCallFormat::command_r));
  LOOM_STEP(add_array(s, i, kCommandRKeys, g, i));
  return close_with(s, i, std::move(g), "<|END_ACTION|>");
}

GroupScan scan_granite(std::string_view s) {
  GroupScan g;
  std::size_t i = skip_space(s, after_trigger(s, ToolCallFormat::granite));
  LOOM_STEP(add_array(s, i, kNameArguments, g, i));
  return complete_at(std::move(g), i);
}

GroupScan scan_functionary(std::string_view s) {
  GroupScan g;
  std::size_t i = after_trigger(s, ToolCallFormat::functionary_v3_1);
  std::string name;
  LOOM_STEP(scan_name(s, i, name, i));
  LOOM_STEP(literal_step(s, i, ">"));
  LOOM_STEP(add_raw_arguments(s, skip_space(s, i), name, g, i));
  return close_with(s, i, std::move(g), "</function>");
}

constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";

// <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜> (fences optional).
Scan deepseek_call(std::string_view s, std::size_t& i, GroupScan& g) {
  std::string type, name;
  if (const Scan m = literal_step(s, i, kDsCallBegin); m != Scan::complete) return m;
  if (const Scan m = scan_name(s, i, type, i); m != Scan::complete) return m;
  if (const Scan m = literal_step(s, i, kDsSep); m != Scan::complete) return m;
  if (const Scan m = scan_name(s, i, name, i); m != Scan::complete) return m;
  i = skip_space(s, i);
  if (const Scan m = optional_step(s, i, "```json"); m != Scan::complete) return m;
  if (const Scan m = add_raw_arguments(s, skip_space(s, i), name, g, i); m != Scan::complete) return m;
  i = skip_space(s, i);
  if (const Scan m = optional_step(s, i, "```"); m != Scan::complete) return m;
  i = skip_space(s, i);
  return literal_step(s, i, kDsCallEnd);
}

GroupScan scan_deepseek(std::string_view s) {
  GroupScan g;
  std::size_t i = 0;
  if (!s.starts_with(kDsCallsBegin)) {  // a lone call without the list markers
    LOOM_STEP(deepseek_call(s, i, g));
    return complete_at(std::move(g), i);
  }
  i = kDsCallsBegin.size();
  for (;;) {
    i = skip_space(s, i);
    LOOM_STEP(deepseek_call(s, i, g));
    i = skip_space(s, i);
    if (match_literal(s, i, kDsCallBegin) == Scan::complete) continue;
    const Scan m = match_literal(s, i, kDsCallsEnd);
    if (m == Scan::invalid && match_literal(s, i, kDsCallBegin) == Scan::invalid) return invalid();
    if (m != Scan::complete) return incomplete(std::move(g.calls), true);
    return complete_at(std::move(g), i + kDsCallsEnd.size());
  }
}

#undef LOOM_STEP

}  // namespace

const std::vector<std::string>& call_triggers(ToolCallFormat format) {
  static const std::vector<std::string> none, hermes{"<tool_call>"},
      llama3{"<|python_tag|>", "<|python_start|>", "<|python_end|>"}, mistral{"[TOOL_CALLS]"}, command_r{"<|START_ACTION|>"},
      functionary{"<function="}, deepseek{std::string(kDsCallsBegin), std::string(kDsCallBegin)},
      granite{"<|tool_call|>"};
  switch (format) {
    case ToolCallFormat::hermes: return hermes;
    case ToolCallFormat::llama3: return llama3;
    case ToolCallFormat::mistral: return mistral;
    case ToolCallFormat::command_r: return command_r;
    case ToolCallFormat::functionary_v3_1: return functionary;
    case ToolCallFormat::deepseek: return deepseek;
    case ToolCallFormat::granite: return granite;
    default: return none;
  }
}

GroupScan scan_group(ToolCallFormat format, std::string_view s) {
  switch (format) {
    case ToolCallFormat::hermes: return scan_hermes(s);
    case ToolCallFormat::llama3: return scan_llama3(s);
    case ToolCallFormat::mistral: return scan_mistral(s);
    case ToolCallFormat::command_r: return scan_command_r(s);
    case ToolCallFormat::functionary_v3_1: return scan_functionary(s);
    case ToolCallFormat::deepseek: return scan_deepseek(s);
    case ToolCallFormat::granite: return scan_granite(s);
    default: return invalid();
  }
}

}  // namespace loom::compute::reply_detail
