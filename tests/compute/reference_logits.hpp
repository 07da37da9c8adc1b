// The reference logits in ../shared/reference (README there: one JSON file per model and prompt, written by an
// independent implementation): the prompt's tokens, the top entries after each prompt position, the greedy
// continuation and the top entries after each of its steps. Read by the CPU's and the Vulkan backend's parity tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::compute::testing {

struct ReferenceTop {
  std::int32_t token;
  float logit;
};

struct ReferenceLogits {
  std::vector<std::int32_t> prompt_tokens;
  std::vector<std::vector<ReferenceTop>> prompt_top;  // after each prompt position
  std::vector<std::int32_t> greedy;
  std::vector<std::vector<ReferenceTop>> greedy_top;  // after each greedy step
};

// Throws std::runtime_error naming the path when the file is missing.
inline ReferenceLogits read_reference_logits(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing reference file " + path);
  const auto j = nlohmann::json::parse(in);
  const auto tops = [](const nlohmann::json& positions) {
    std::vector<std::vector<ReferenceTop>> out;
    for (const auto& position : positions) {
      auto& top = out.emplace_back();
      for (const auto& pair : position) top.push_back({pair[0].get<std::int32_t>(), pair[1].get<float>()});
    }
    return out;
  };
  return {j.at("prompt_tokens").get<std::vector<std::int32_t>>(), tops(j.at("prompt_top")),
          j.at("greedy").get<std::vector<std::int32_t>>(), tops(j.at("greedy_top"))};
}

}  // namespace loom::compute::testing
