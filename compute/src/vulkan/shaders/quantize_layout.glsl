// The prepared activations' layout on the device (vulkan_matmul.cpp prepared_bytes()), in uint words, for
// n tokens of `cols` values: every token's quants first (cols bytes each, 32 per group, so a group's 32
// quants are 8 aligned words), then the F32 scales (one per 32 values for Q8_0/Q8_1, per 256 for Q8_K, as
// the f16-rounded value the CPU's block stores for Q8_0/Q8_1), then Q8_1's sums s (f16-rounded F32) or
// Q8_K's bsums (one int32 per 16 values). F16 activations are F32 values rounded to f16; F32 ones are x.
#ifndef QUANTIZE_LAYOUT_GLSL
#define QUANTIZE_LAYOUT_GLSL

const uint ACT_F32 = 0u, ACT_F16 = 1u, ACT_Q8_0 = 2u, ACT_Q8_1 = 3u, ACT_Q8_K = 4u;

struct QuantLayout {
  uint scales;  // first word of the scales
  uint extra;   // first word of Q8_1's s or Q8_K's bsums
};

QuantLayout quant_layout(uint format, uint n, uint cols) {
  QuantLayout l;
  l.scales = n * cols / 4u;
  l.extra = l.scales + n * cols / (format == ACT_Q8_K ? 256u : 32u);
  return l;
}

// The first word of group `group` (32 values) of token t's quants.
uint qs_word(uint cols, uint t, uint group) { return t * (cols / 4u) + 8u * group; }

#endif
