// What the activation quantizers share: a correctly rounded division (the CPU's a / b, bit for bit: a
// device's own division may be an ulp or two off, and an activation scale one ulp off moves a quant by one
// step now and then) and the index of the thread's item.
#ifndef QUANTIZE_COMMON_GLSL
#define QUANTIZE_COMMON_GLSL

// Veltkamp's split of x into a high half and a low half, each exact in 12 bits.
void split_float(float x, out float hi, out float lo) {
  precise float c = 4097.0 * x;
  precise float big = c - x;
  precise float h = c - big;
  precise float l = x - h;
  hi = h;
  lo = l;
}

// |a - q * b|, exactly but for the final rounding (Dekker's product: q * b = p + e exactly, and a - p is
// exact for q near a / b).
float division_remainder(float a, float b, float q) {
  float qh, ql, bh, bl;
  split_float(q, qh, ql);
  split_float(b, bh, bl);
  precise float p = q * b;
  precise float e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;
  precise float r = (a - p) - e;
  return abs(r);
}

// a / b rounded to nearest even, for the finite, normal operands of the quantizers, from a quotient q0 at
// most two ulps off: of the candidates within two ulps of it, the one with the least remainder.
float divide_rounded_from(float a, float b, float q0) {
  if (q0 == 0.0 || isinf(q0) || isnan(q0)) return q0;
  float best = q0;
  float best_remainder = division_remainder(a, b, q0);
  const uint bits = floatBitsToUint(q0);
  for (int k = -2; k <= 2; ++k) {
    if (k == 0) continue;
    const float q = uintBitsToFloat(uint(int(bits) + k));
    const float r = division_remainder(a, b, q);
    if (r < best_remainder || (r == best_remainder && (floatBitsToUint(q) & 1u) == 0u)) {
      best = q;
      best_remainder = r;
    }
  }
  return best;
}

float divide_rounded(float a, float b) { return divide_rounded_from(a, b, a / b); }

// The linear index of this thread over a grid that may wrap into y (more than 65535 workgroups along x).
uint thread_index() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x; }

#endif
