// Float -> F16 bits, rounded to nearest with ties to even, exactly as the CPU's float_to_half
// (loom/compute/model/half.hpp): packHalf2x16's rounding is left to the implementation, and a KV cache written
// here must hold the same bits the CPU backend would store.
uint ops_float_to_half(float value) {
  const uint bits = floatBitsToUint(value);
  const uint sign = (bits >> 16) & 0x8000u;
  const uint magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu);  // NaN stays NaN
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;                               // overflow: infinity
  if (magnitude >= 0x38800000u) {                                                     // normal half
    const uint rebiased = magnitude - (112u << 23);
    return sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13);
  }
  if (magnitude <= 0x33000000u) return sign;  // rounds to zero
  const uint exponent = magnitude >> 23;      // subnormal half
  const uint significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const uint shift = 126u - exponent;
  const uint kept = significand >> shift;
  const uint dropped = significand & ((1u << shift) - 1u);
  const uint halfway = 1u << (shift - 1u);
  return sign | (kept + ((dropped > halfway || (dropped == halfway && (kept & 1u) != 0u)) ? 1u : 0u));
}

// The value an F16 holds (exact: every F16 is a float).
float ops_half_to_float(uint h) { return unpackHalf2x16(h & 0xFFFFu).x; }

// tanh that saturates instead of dividing infinities: tanh's usual form (e^2x - 1) / (e^2x + 1) is NaN for
// large |x| on some drivers, while |tanh(x)| rounds to 1 in float from |x| > 9.01 on.
float ops_tanh(float x) { return abs(x) > 10.0 ? sign(x) : tanh(x); }
