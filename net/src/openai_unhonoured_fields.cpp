#include "openai_unhonoured_fields.hpp"

#include <array>

namespace loom::net::openai {

namespace {

using nlohmann::json;

bool number_equal(const json& value, double off) { return value.is_number() && value.get<double>() == off; }

bool zero(const json& value) { return number_equal(value, 0.0) || value == false; }
bool one(const json& value) { return number_equal(value, 1.0); }
// llama.cpp's top_n_sigma is off at any value <= 0 (its default is -1).
bool not_positive(const json& value) { return value.is_number() && value.get<double>() <= 0.0; }
bool is_true(const json& value) { return value == true; }
// Only text out: ["text"] (or nothing).
bool text_only(const json& value) {
  if (!value.is_array()) return false;
  for (const json& item : value) {
    if (item != "text") return false;
  }
  return true;
}
bool never(const json&) { return false; }

constexpr std::array kFields{
    UnhonouredField{"mirostat", "Mirostat sampling", "0", zero},
    UnhonouredField{"dry_multiplier", "DRY repetition penalty", "0", zero},
    UnhonouredField{"xtc_probability", "XTC sampling", "0", zero},
    UnhonouredField{"typical_p", "locally typical sampling", "1", one},
    UnhonouredField{"tfs_z", "tail-free sampling", "1", one},
    UnhonouredField{"dynatemp_range", "dynamic temperature", "0", zero},
    UnhonouredField{"top_n_sigma", "top-n-sigma sampling", "-1 (any value <= 0)", not_positive},
    UnhonouredField{"samplers", "a custom order of samplers", "absent", never},
    UnhonouredField{"n_probs", "llama.cpp's per-token probabilities (use logprobs)", "0", zero},
    UnhonouredField{"cache_prompt", "turning the prefix cache off", "true", is_true},
    UnhonouredField{"audio", "audio output", "absent", never},
    UnhonouredField{"modalities", "output other than text", "[\"text\"]", text_only},
    UnhonouredField{"web_search_options", "web search", "absent", never},
};

}  // namespace

std::span<const UnhonouredField> unhonoured_fields() { return kFields; }

std::vector<std::string> unhonoured_fields_in(const json& body) {
  std::vector<std::string> found;
  if (!body.is_object()) return found;
  for (const UnhonouredField& field : kFields) {
    const auto it = body.find(field.name);
    // Absent and null are the same, as everywhere in the API.
    if (it == body.end() || it->is_null() || field.is_off(*it)) continue;
    found.emplace_back(field.name);
  }
  return found;
}

std::optional<bool> read_lenient(const json& body) {
  const auto it = body.find("lenient");
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

}  // namespace loom::net::openai
