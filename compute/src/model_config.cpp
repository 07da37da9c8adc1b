#include "loom/compute/model_config.hpp"

#include <array>

namespace loom::compute {
namespace {

// Add a new architecture here (and to the enum); the loader and to_string() read this table.
constexpr std::array kArchitectures{
    ArchitectureName{Architecture::llama, "llama"},   ArchitectureName{Architecture::qwen2, "qwen2"},
    ArchitectureName{Architecture::qwen3, "qwen3"},   ArchitectureName{Architecture::gemma, "gemma"},
    ArchitectureName{Architecture::gemma2, "gemma2"}, ArchitectureName{Architecture::gemma3, "gemma3"},
    ArchitectureName{Architecture::phi3, "phi3"},     ArchitectureName{Architecture::qwen2moe, "qwen2moe"},
    ArchitectureName{Architecture::qwen3moe, "qwen3moe"},
};

}  // namespace

std::span<const ArchitectureName> supported_architectures() { return kArchitectures; }

std::string supported_architecture_list() {
  std::string list;
  for (const auto& a : kArchitectures) {
    if (!list.empty()) list += ", ";
    list += a.name;
  }
  return list;
}

std::string to_string(Pooling pooling) {
  switch (pooling) {
    case Pooling::none: return "none";
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::last: return "last";
    case Pooling::rank: return "rank";
  }
  return "unknown";
}

std::string to_string(Architecture architecture) {
  for (const auto& a : kArchitectures) {
    if (a.architecture == architecture) return std::string(a.name);
  }
  return "unknown";
}

}  // namespace loom::compute
