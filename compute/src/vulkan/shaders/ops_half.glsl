// F16 conversions exactly as the CPU's float_to_half / half_to_float (loom/compute/model/half.hpp), in integer
// arithmetic (dequant_half.glsl): packHalf2x16's rounding is left to the implementation, and a KV cache written
// here must hold the same bits the CPU backend would store.
#include "dequant_half.glsl"

uint ops_float_to_half(float value) { return float_to_half_bits(value); }
float ops_half_to_float(uint h) { return half_bits_to_float(h & 0xFFFFu); }

// tanh that saturates instead of dividing infinities: tanh's usual form (e^2x - 1) / (e^2x + 1) is NaN for
// large |x| on some drivers, while |tanh(x)| rounds to 1 in float from |x| > 9.01 on.
float ops_tanh(float x) { return abs(x) > 10.0 ? sign(x) : tanh(x); }
