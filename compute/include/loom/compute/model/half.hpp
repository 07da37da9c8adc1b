// Scalar conversions between f32 and the two 16-bit float formats GGUF tensors use: IEEE binary16 ("f16",
// also the scale type of every GGML block format) and bfloat16 ("bf16", the top half of an f32). The 16-bit
// values are carried as their raw bits (std::uint16_t) because that is how they sit in memory-mapped files.
//
// All four are exact where exactness is possible: f16 -> f32 and bf16 -> f32 are lossless (subnormals, infinities
// and NaN payloads included); f32 -> f16 and f32 -> bf16 round to nearest, ties to even, overflow to infinity and
// keep NaNs NaN (quiet). They are constexpr so tables and tests can use them at compile time; SIMD kernels use
// the hardware conversions instead, which give the same results.
#pragma once

#include <bit>
#include <cstdint>

namespace loom::compute {

constexpr float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t magnitude = h & 0x7FFFu;
  if (magnitude < 0x0400u) {
    // Zero or subnormal m * 2^-24: the int -> float conversion and the power-of-two product are exact, and
    // neither the operands nor the result are f32 subnormals (so flush-to-zero modes cannot interfere).
    const float v = static_cast<float>(magnitude) * 0x1p-24f;
    return sign != 0 ? -v : v;
  }
  // Normal: shift exponent and mantissa into place and rebias 15 -> 127; infinity/NaN (exponent 31) need
  // the all-ones f32 exponent, i.e. the rebias once more. NaN payloads are kept.
  std::uint32_t bits = (magnitude << 13) + (112u << 23);
  if (magnitude >= 0x7C00u) bits += 112u << 23;
  return std::bit_cast<float>(bits | sign);
}

constexpr std::uint16_t float_to_half(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: keep the top payload bits and force the quiet bit so it stays NaN
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  if (magnitude >= 0x477FF000u) {  // >= 65520 rounds past the largest half (65504): infinity
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  }
  if (magnitude >= 0x38800000u) {  // normal half range (>= 2^-14): rebias, then round the 13 dropped bits
    const std::uint32_t rebiased = magnitude - (112u << 23);
    const std::uint32_t rounded = (rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13;
    return static_cast<std::uint16_t>(sign | rounded);
  }
  if (magnitude <= 0x33000000u) {  // <= 2^-25: half-way to the smallest subnormal or less rounds to zero
    return sign;
  }
  // Subnormal half: the value is m * 2^-24 with m = significand >> (126 - exponent), rounded to even.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;  // 14..24 in this range
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  const std::uint32_t m = kept + ((dropped > halfway || (dropped == halfway && (kept & 1u))) ? 1u : 0u);
  return static_cast<std::uint16_t>(sign | m);  // m may carry into the exponent: 2^-14, which is right
}

constexpr float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

constexpr std::uint16_t float_to_bf16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: truncating could clear the payload; force quiet instead
    return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  }
  // Round to nearest even; a carry out of the mantissa correctly bumps the exponent (up to infinity).
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace loom::compute
