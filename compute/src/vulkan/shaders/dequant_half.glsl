// f16 <-> f32 as the CPU code converts them (compute/include/loom/compute/model/half.hpp), in integer
// arithmetic: the device's own conversions may flush f16 subnormals or round another way, and a block's
// scale is often a small f16.
#ifndef DEQUANT_HALF_GLSL
#define DEQUANT_HALF_GLSL

float half_bits_to_float(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint magnitude = h & 0x7FFFu;
  if (magnitude < 0x0400u) {
    // m * 2^-24: exact, and a normal f32 (or zero).
    const float v = float(magnitude) * uintBitsToFloat(0x33800000u);
    return sign != 0u ? -v : v;
  }
  uint bits = (magnitude << 13) + (112u << 23);
  if (magnitude >= 0x7C00u) bits += 112u << 23;
  return uintBitsToFloat(bits | sign);
}

uint float_to_half_bits(float value) {
  const uint bits = floatBitsToUint(value);
  const uint sign = (bits >> 16) & 0x8000u;
  const uint magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu);
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;
  if (magnitude >= 0x38800000u) {
    const uint rebiased = magnitude - (112u << 23);
    return sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13);
  }
  if (magnitude <= 0x33000000u) return sign;
  const uint exponent = magnitude >> 23;
  const uint significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const uint shift = 126u - exponent;
  const uint kept = significand >> shift;
  const uint dropped = significand & ((1u << shift) - 1u);
  const uint halfway = 1u << (shift - 1u);
  return sign | (kept + ((dropped > halfway || (dropped == halfway && (kept & 1u) != 0u)) ? 1u : 0u));
}

float round_to_half(float value) { return half_bits_to_float(float_to_half_bits(value)); }

float bf16_bits_to_float(uint b) { return uintBitsToFloat(b << 16); }

#endif
