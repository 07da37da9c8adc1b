#include "loom/compute/model_config.hpp"

namespace loom::compute {

std::string to_string(Architecture architecture) {
  switch (architecture) {
    case Architecture::llama:
      return "llama";
    case Architecture::qwen2:
      return "qwen2";
    case Architecture::qwen3:
      return "qwen3";
    case Architecture::phi3:
      return "phi3";
    case Architecture::qwen2moe:
      return "qwen2moe";
    case Architecture::qwen3moe:
      return "qwen3moe";
  }
  return "unknown";
}

}  // namespace loom::compute
