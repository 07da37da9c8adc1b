// The CPU's pinned exponentials (compute/src/cpu/attention.cpp) in GLSL, bit for bit: vector_expf (the
// reference's AVX-512 expf, for whole groups of 16) and avx2_expf (its AVX2 expf, whole groups of 8), and the
// C library's expf and tanhf for what is left over, computed in double and rounded once (the C library's are
// within about half an ulp, so the two agree but for the rare input whose exact result sits within a
// hair of a float rounding boundary). Needs shaderFloat64. Every expression is `precise` (glslc must not
// contract a product and a sum into an FMA where the CPU rounds twice) and every FMA is pinned_fma().
#ifndef LOOM_PINNED_MATH_GLSL
#define LOOM_PINNED_MATH_GLSL

const float kPinnedShifter = 12582912.0;  // 1.5 * 2^23
#define PINNED_F(bits) uintBitsToFloat(bits)

// fma(a, b, c) rounded once, on any driver: glslc leaves GLSL's fma() unmarked by `precise`, so a driver may
// split it or reassociate it with its neighbours (Mesa's lavapipe folds fma(-n, lo, fma(-n, hi, x)) into
// x - n (hi + lo)). The product is exact in double; the sum's error comes from TwoSum, and rounding the double
// sum to odd when it is inexact makes the final rounding to float the single rounding of the exact result.
float pinned_fma(float a, float b, float c) {
  precise double product = double(a) * double(b);
  precise double sum = product + double(c);
  if (isinf(sum) || isnan(sum)) return float(sum);
  precise double back = sum - product;
  precise double error = (product - (sum - back)) + (double(c) - back);
  if (error != 0.0) {
    uvec2 w = unpackDouble2x32(sum);
    if ((w.x & 1u) == 0u) {  // even: step one ulp towards the exact value, which makes it odd
      if ((error > 0.0) == (sum > 0.0)) {
        w.x += 1u;  // even: no carry
      } else {
        w.y -= w.x == 0u ? 1u : 0u;
        w.x -= 1u;
      }
      sum = packDouble2x32(w);
    }
  }
  return float(sum);
}

// 2^n as a double, for -1022 <= n <= 1023.
double pinned_pow2(int n) { return packDouble2x32(uvec2(0u, uint(n + 1023) << 20)); }

// n = round(x / ln 2), b = x - n ln 2 (ln 2 in two parts): both expf's reduction.
void pinned_reduce(float x, out float z, out float n, out float b) {
  precise float zz = pinned_fma(x, PINNED_F(0x3fb8aa3bu), kPinnedShifter);
  precise float nn = zz - kPinnedShifter;
  precise float bb = pinned_fma(-nn, PINNED_F(0x35bfbe8eu), pinned_fma(-nn, PINNED_F(0x3f317200u), x));
  z = zz;
  n = nn;
  b = bb;
}

float pinned_vector_expf(float x) {
  float z, n, b;
  pinned_reduce(x, z, n, b);
  if (isnan(n)) return n;
  if (!(abs(n) <= 192.0)) return n <= 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
  precise float u = b * b;
  precise float j = pinned_fma(pinned_fma(pinned_fma(PINNED_F(0x3c072010u), b, PINNED_F(0x3d2b9f17u)), u,
                            pinned_fma(PINNED_F(0x3e2aaf33u), b, PINNED_F(0x3efffedbu))),
                        u, pinned_fma(PINNED_F(0x3f7ffff6u), b, 1.0));
  precise double scaled = double(j) * pinned_pow2(int(n));  // exact in double; one rounding to float
  return float(scaled);
}

float pinned_avx2_expf(float x) {
  float z, n, b;
  pinned_reduce(x, z, n, b);
  if (isnan(n)) return n;
  precise float u = b * b;
  precise float j = pinned_fma(pinned_fma(pinned_fma(PINNED_F(0x3c072010u), b, PINNED_F(0x3d2b9f17u)), u,
                            pinned_fma(PINNED_F(0x3e2aaf33u), b, PINNED_F(0x3efffedbu))),
                        u, PINNED_F(0x3f7ffff6u) * b);
  const uint e = floatBitsToUint(z) << 23;
  if (abs(n) <= 126.0) {
    const float k = uintBitsToFloat(e + 0x3f800000u);
    precise float r = pinned_fma(k, j, k);
    return r;
  }
  const uint g = n <= 0.0 ? 0x82000000u : 0u;
  const float s1 = uintBitsToFloat(g + 0x7f000000u);
  if (abs(n) > 192.0) {
    precise float r = s1 * s1;
    return r;
  }
  const float s2 = uintBitsToFloat(e - g);
  precise float r = pinned_fma(s2, j, s2) * s1;
  return r;
}

// e^y - 1 in double for |y| <= 0.35 (Taylor to degree 16: far below a double's rounding).
double pinned_expm1_small(double y) {
  precise double term = y, sum = y;
  for (int k = 2; k <= 16; ++k) {
    term = term * y / double(k);
    sum = sum + term;
  }
  return sum;
}

// e^x in double for a float x (no overflow or underflow of a double for |x| < 200).
double pinned_exp_double(double x) {
  precise double n = round(x * 1.4426950408889634);
  precise double r = (x - n * 0.6931471805599453) - n * 2.3190468138462996e-17;
  return (1.0 + pinned_expm1_small(r)) * pinned_pow2(int(n));
}

// The C library's expf.
float pinned_libc_expf(float x) {
  if (isnan(x)) return x;
  if (x > 88.8) return uintBitsToFloat(0x7f800000u);
  if (x < -104.0) return 0.0;
  return float(pinned_exp_double(double(x)));
}

// The C library's tanhf.
float pinned_libc_tanhf(float x) {
  if (isnan(x)) return x;
  const double a = abs(double(x));
  if (a > 20.0) return x > 0.0 ? 1.0 : -1.0;
  precise double m = a <= 0.175 ? pinned_expm1_small(2.0 * a) : pinned_exp_double(2.0 * a) - 1.0;
  precise double t = m / (m + 2.0);
  return float(x < 0.0 ? -t : t);
}

// a / b as IEEE division rounds it: the double quotient is within a few double ulps (whatever the device's
// division), and a quotient of two floats never lies that close to a float rounding boundary.
float pinned_divide(float a, float b) {
  precise double q = double(a) / double(b);
  return float(q);
}

#endif
