#include "loom/compute/tensor_type.hpp"

#include <array>
#include <limits>
#include <stdexcept>
#include <string>

namespace loom::compute {
namespace {

// Block sizes are facts of the GGML format: e.g. Q4_0 = fp16 scale + 32 packed nibbles = 18 bytes per 32
// values; Q4_1 adds an fp16 min (20 bytes), Q5_0 4 bytes of fifth bits (22), Q5_1 both (24), IQ4_NL is
// Q4_0's shape with table-mapped nibbles (18), Q8_1 is Q8_0 plus an fp16 d * sum(q) (36); Q4_K = 2 fp16 +
// 12 bytes of 6-bit scales/mins + 128 bytes of nibbles = 144 bytes per 256 values; Q2_K = 16 bytes of 4-bit
// scale/min pairs + 64 bytes of 2-bit values + 2 fp16 = 84; Q3_K = 32 bytes of high bits + 64 of low 2 bits +
// 12 of 6-bit scales + fp16 = 110; IQ4_XS = fp16 + 2 + 4 bytes of 6-bit scales + 128 bytes of nibbles = 136.
constexpr std::array kTypes{
    TensorTypeTraits{TensorType::f32, "f32", 1, 4, true},
    TensorTypeTraits{TensorType::f16, "f16", 1, 2, true},
    TensorTypeTraits{TensorType::q4_0, "q4_0", 32, 18, true},
    TensorTypeTraits{TensorType::q4_1, "q4_1", 32, 20, true},
    TensorTypeTraits{TensorType::q5_0, "q5_0", 32, 22, true},
    TensorTypeTraits{TensorType::q5_1, "q5_1", 32, 24, true},
    TensorTypeTraits{TensorType::q8_0, "q8_0", 32, 34, true},
    TensorTypeTraits{TensorType::q8_1, "q8_1", 32, 36, true},
    TensorTypeTraits{TensorType::q2_k, "q2_K", 256, 84, true},
    TensorTypeTraits{TensorType::q3_k, "q3_K", 256, 110, true},
    TensorTypeTraits{TensorType::q4_k, "q4_K", 256, 144, true},
    TensorTypeTraits{TensorType::q5_k, "q5_K", 256, 176, true},
    TensorTypeTraits{TensorType::q6_k, "q6_K", 256, 210, true},
    TensorTypeTraits{TensorType::q8_k, "q8_K", 256, 292, true},
    TensorTypeTraits{TensorType::iq4_nl, "iq4_nl", 32, 18, true},
    TensorTypeTraits{TensorType::iq4_xs, "iq4_xs", 256, 136, true},
    TensorTypeTraits{TensorType::i8, "i8", 1, 1, false},
    TensorTypeTraits{TensorType::i16, "i16", 1, 2, false},
    TensorTypeTraits{TensorType::i32, "i32", 1, 4, false},
    TensorTypeTraits{TensorType::i64, "i64", 1, 8, false},
    TensorTypeTraits{TensorType::f64, "f64", 1, 8, false},
    TensorTypeTraits{TensorType::bf16, "bf16", 1, 2, true},
};

}  // namespace

const TensorTypeTraits* find_tensor_type(std::uint32_t raw_id) noexcept {
  for (const auto& t : kTypes) {
    if (static_cast<std::uint32_t>(t.type) == raw_id) return &t;
  }
  return nullptr;
}

const TensorTypeTraits& traits(TensorType type) noexcept { return *find_tensor_type(static_cast<std::uint32_t>(type)); }

std::int64_t whole_blocks(TensorType type, std::int64_t n, std::string_view caller) {
  const TensorTypeTraits* t = find_tensor_type(static_cast<std::uint32_t>(type));
  if (t == nullptr) {
    throw std::invalid_argument(std::string(caller) + ": unknown tensor type id " +
                                std::to_string(static_cast<std::uint32_t>(type)));
  }
  const auto block = static_cast<std::int64_t>(t->block_elements);
  if (n < 0 || n % block != 0) {
    throw std::invalid_argument(std::string(caller) + ": " + std::to_string(n) + " values of " + std::string(t->name) +
                                " is not a whole number of " + std::to_string(block) + "-value blocks");
  }
  return n / block;
}

std::optional<std::uint64_t> tensor_bytes(TensorType type, std::uint64_t elements) noexcept {
  const auto& t = traits(type);
  if (elements % t.block_elements != 0) return std::nullopt;
  const std::uint64_t blocks = elements / t.block_elements;
  if (blocks > std::numeric_limits<std::uint64_t>::max() / t.block_bytes) return std::nullopt;
  return blocks * t.block_bytes;
}

}  // namespace loom::compute
