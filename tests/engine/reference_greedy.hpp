// The shared reference's greedy continuation of "Once upon a time" on aidreams260K
// (../shared/reference/aidreams260K.once.json), which engine suites compare their generations with.
#pragma once

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_files.hpp"

namespace loom::testing {

inline std::vector<std::int32_t> reference_greedy() {
  const auto path = compute::testing::shared_path("reference/aidreams260K.once.json");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing shared test file " + path);
  return nlohmann::json::parse(in).at("greedy").get<std::vector<std::int32_t>>();
}

}  // namespace loom::testing
