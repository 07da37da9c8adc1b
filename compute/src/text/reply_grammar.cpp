// The tool-call grammar (tool_call_grammar.hpp). Each tool's parameters schema is converted on its own by
// json_schema_to_gbnf and its rules renamed with a per-tool prefix ("t0-", "t1-", ...), so that the
// converter's rule names (root, ws, string, one per property) never collide between tools or with the
// rules written here (root, calls, call, call-N, which never start with "t<digit>-").
#include <nlohmann/json.hpp>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/compute/grammar/grammar.hpp"
#include "loom/compute/grammar/json_schema.hpp"
#include "loom/compute/text/tool_call_grammar.hpp"

namespace loom::compute {
namespace {

using nlohmann::ordered_json;

bool is_rule_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Copies s[i] through the byte that closes what it opens (a literal, a class, a repetition count).
std::size_t copy_quoted(std::string_view s, std::size_t i, char close, std::string& out) {
  out += s[i++];
  while (i < s.size() && s[i] != close) {
    if (s[i] == '\\' && i + 1 < s.size()) out += s[i++];
    out += s[i++];
  }
  if (i < s.size()) out += s[i++];
  return i;
}

// The converter's GBNF (one `name ::= body` per line) with every rule name and reference prefixed.
std::string prefix_rules(std::string_view gbnf, const std::string& prefix) {
  std::string out;
  for (std::size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"') i = copy_quoted(gbnf, i, '"', out);
    else if (c == '[') i = copy_quoted(gbnf, i, ']', out);
    else if (c == '{') i = copy_quoted(gbnf, i, '}', out);
    else if (c == '#') while (i < gbnf.size() && gbnf[i] != '\n') ++i;
    else if (is_rule_char(c)) {
      out += prefix;
      while (i < gbnf.size() && is_rule_char(gbnf[i])) out += gbnf[i++];
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// Joins pieces. (GCC 12 warns falsely, -Wrestrict, on chains of "literal" + std::string temporaries.)
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += p;
  return out;
}

// A GBNF string literal of raw text.
std::string lit(std::string_view text) { return grammar::gbnf_literal(text); }

struct Tool {
  std::string name;
  std::string rules;  // prefixed rules; the arguments' start rule is `prefix + "root"`
  std::string args;
};

std::vector<Tool> collect_tools(const ordered_json& tools, const std::optional<std::string>& only) {
  if (!tools.is_array()) throw std::invalid_argument("tools must be a list");
  std::vector<Tool> out;
  for (const auto& tool : tools) {
    const ordered_json& fn = tool.contains("function") ? tool.at("function") : tool;
    if (!fn.is_object() || !fn.contains("name") || !fn.at("name").is_string()) {
      throw std::invalid_argument("a tool without a function name");
    }
    const std::string name = fn.at("name").get<std::string>();
    if (only && *only != name) continue;
    // Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string temporaries.
    std::string prefix = "t";
    prefix += std::to_string(out.size());
    prefix += '-';
    const auto params = fn.find("parameters");
    const std::string gbnf = params == fn.end() || params->is_null() ? grammar::json_object_gbnf()
                                                                     : grammar::json_schema_to_gbnf(*params);
    out.push_back({name, prefix_rules(gbnf, prefix), prefix + "root"});
  }
  if (out.empty()) {
    throw std::invalid_argument(only ? "no tool is named " + *only : std::string("no tools to call"));
  }
  return out;
}

// Families that write the name as bare text need a name the parser reads as one.
void require_plain_name(const std::string& name) {
  for (char c : name) {
    if (!is_rule_char(c) && c != '.') throw std::invalid_argument("tool name not writable in this format: " + name);
  }
  if (name.empty()) throw std::invalid_argument("empty tool name");
}

std::string json_name(const std::string& name) { return ordered_json(name).dump(); }

// One call to `t` in the family's syntax, as a GBNF sequence.
std::string call_body(const ReplyFormat& format, const Tool& t) {
  switch (format.tools) {
    case ToolCallFormat::hermes:
      return lit("<tool_call>\n{\"name\": " + json_name(t.name) + ", \"arguments\": ") + " " + t.args + " " +
             lit("}\n</tool_call>");
    case ToolCallFormat::llama3:
      return lit("{\"name\": " + json_name(t.name) + ", \"parameters\": ") + " " + t.args + " " + lit("}");
    case ToolCallFormat::mistral:
      if (format.name_then_args) {
        require_plain_name(t.name);
        return lit("[TOOL_CALLS]" + t.name + "[ARGS]") + " " + t.args;
      }
      return lit("{\"name\": " + json_name(t.name) + ", \"arguments\": ") + " " + t.args + " " + lit("}");
    case ToolCallFormat::command_r:
      return lit("{\"tool_call_id\": \"") + " [0-9]{1,3} " + lit("\", \"tool_name\": " + json_name(t.name) +
             ", \"parameters\": ") + " " + t.args + " " + lit("}");
    case ToolCallFormat::functionary_v3_1:
      require_plain_name(t.name);
      return lit("<function=" + t.name + ">") + " " + t.args + " " + lit("</function>");
    case ToolCallFormat::deepseek:
      require_plain_name(t.name);
      return lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + t.name + "\n```json\n") + " " + t.args + " " +
             lit("\n```<｜tool▁call▁end｜>");
    case ToolCallFormat::granite:
      return lit("{\"name\": " + json_name(t.name) + ", \"arguments\": ") + " " + t.args + " " + lit("}");
    case ToolCallFormat::gpt_oss:
      require_plain_name(t.name);
      return lit("<|channel|>commentary to=functions." + t.name + " <|constrain|>json<|message|>") + " " + t.args +
             " " + lit("<|call|>");
    case ToolCallFormat::none: break;
  }
  throw std::invalid_argument("format none has no tool-call syntax");
}

// How calls are strung together: (before all, between two, after all).
struct Frame {
  std::string open, separator, close;
};

Frame frame_of(const ReplyFormat& format) {
  switch (format.tools) {
    case ToolCallFormat::hermes: return {"", "\n", ""};
    case ToolCallFormat::llama3: return {"", "", ""};
    case ToolCallFormat::mistral: return format.name_then_args ? Frame{"", "", ""} : Frame{"[TOOL_CALLS][", ", ", "]"};
    case ToolCallFormat::command_r: return {"<|START_ACTION|>[\n    ", ",\n    ", "\n]<|END_ACTION|>"};
    case ToolCallFormat::functionary_v3_1: return {"", "\n", ""};
    case ToolCallFormat::deepseek: return {"<｜tool▁calls▁begin｜>", "\n", "<｜tool▁calls▁end｜>"};
    case ToolCallFormat::granite: return {"<|tool_call|>[", ", ", "]"};
    case ToolCallFormat::gpt_oss: return {"", "<|start|>assistant", ""};
    case ToolCallFormat::none: break;
  }
  return {};
}

// A GBNF class of everything but `excluded` (ASCII): [^...] with the class's special characters escaped.
std::string all_but(std::string_view excluded) {
  std::string out = "[^";
  for (char c : excluded) {
    if (c == ']' || c == '\\' || c == '^' || c == '-' || c == '[') out += '\\';
    out += c;
  }
  return out + "]";
}

// Rule `name`: any text in which `marker` does not occur, so that `name marker` ends at the first marker.
// The marker is ASCII and its first character occurs nowhere else in it ("</think>", "<|end|>"), which makes
// "the first character, then anything but the rest" exact. The grammar refuses a beginning of the marker
// that runs straight into another first character ("a<</think>", "</th</think>"): fewer texts, never more.
std::string not_containing(const std::string& name, const std::string& marker) {
  const char first = marker[0];
  std::string after = lit(std::string_view(&first, 1));
  after += "+ (";
  for (std::size_t k = 1; k < marker.size(); ++k) {
    if (k > 1) after += " | " + lit(marker.substr(1, k - 1)) + " ";
    after += all_but(std::string(1, first) + marker[k]);
  }
  after += ")";
  return name + " ::= (" + all_but(std::string(1, first)) + " | " + name + "-mark)*\n" + name + "-mark ::= " + after +
         "\n";
}

bool usable_marker(const std::string& m) {
  if (m.size() < 2 || m.find(m[0], 1) != std::string::npos) return false;
  for (char c : m) if (static_cast<unsigned char>(c) >= 0x80 || c == '"' || c == '\\') return false;
  return true;
}

// What may come before the calls: the family's reasoning (optional; required to close when the reply starts
// inside it). Empty when the family has none or its markers do not fit not_containing(). Without `reasoning`
// nothing comes first, but a reply that starts inside a reasoning block closes it at once.
std::string reasoning_prefix(const ReplyFormat& format, bool reasoning, std::string& rules) {
  if (!reasoning) {
    if (!format.starts_in_reasoning || format.reasoning_close.empty()) return "";
    return cat({lit(format.reasoning_close), " [ \\t\\n]{0,4} "});
  }
  if (format.tools == ToolCallFormat::gpt_oss) {
    rules += not_containing("thought", "<|end|>");
    return cat({"(", lit("<|channel|>analysis<|message|>"), " thought ", lit("<|end|><|start|>assistant"), ")? "});
  }
  if (!usable_marker(format.reasoning_close)) return "";
  rules += not_containing("thought", format.reasoning_close);
  rules += cat({"thought-end ::= ", lit(format.reasoning_close), " [ \\t\\n]{0,4}\n"});
  if (format.starts_in_reasoning) return "thought thought-end ";
  if (format.reasoning_open.empty()) return "";
  return cat({"(", lit(format.reasoning_open), " thought thought-end)? "});
}

}  // namespace

std::string tool_call_grammar(const ReplyFormat& format, const ordered_json& tools,
                              std::optional<std::string> only_function, bool parallel, bool reasoning) {
  if (format.tools == ToolCallFormat::none) throw std::invalid_argument("format none has no tool-call syntax");
  const std::vector<Tool> list = collect_tools(tools, only_function);
  const Frame frame = frame_of(format);
  std::string reasoning_rules;
  std::string out = "root ::= ";
  out += reasoning_prefix(format, reasoning, reasoning_rules);
  if (!frame.open.empty()) out += lit(frame.open) + " ";
  out += "call";
  if (parallel) {
    out += " (";
    if (!frame.separator.empty()) out += lit(frame.separator) + " ";
    out += "call)*";
  }
  if (!frame.close.empty()) out += ' ' + lit(frame.close);
  out += "\ncall ::= ";
  for (std::size_t k = 0; k < list.size(); ++k) {
    out += k ? " | call-" : "call-";
    out += std::to_string(k);
  }
  out += "\n";
  for (std::size_t k = 0; k < list.size(); ++k) {
    out += "call-" + std::to_string(k) + " ::= " + call_body(format, list[k]) + "\n";
  }
  out += reasoning_rules;
  for (const Tool& t : list) out += t.rules;
  return out;
}

}  // namespace loom::compute
