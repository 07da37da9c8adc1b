// Weights read as the file stores them: a row of blocks in `weight_words` (the tensor's raw bytes as uint
// words, so a block that is only 2-byte aligned, Q4_0's 18 bytes or Q8_0's 34, is read by byte offset) and
// decoded 32 values at a time (a "group": a whole Q4_0/Q8_0/... block, or one 32-value slice of a K-quant
// superblock), so every type meets the same matmul and get_rows loops.
//
// The includer declares `weight_words` (uint[]) and the specialization constant WEIGHT_TYPE (the GGML type
// id, compute/include/loom/compute/tensor_type.hpp); the driver folds the type switch away per pipeline.
// Block layouts: compute/include/loom/compute/model/quant_blocks.hpp.
#ifndef DEQUANT_GROUP_GLSL
#define DEQUANT_GROUP_GLSL

#include "dequant_half.glsl"

const uint TYPE_F32 = 0u, TYPE_F16 = 1u, TYPE_Q4_0 = 2u, TYPE_Q4_1 = 3u, TYPE_Q5_0 = 6u, TYPE_Q5_1 = 7u,
           TYPE_Q8_0 = 8u, TYPE_Q2_K = 10u, TYPE_Q3_K = 11u, TYPE_Q4_K = 12u, TYPE_Q5_K = 13u, TYPE_Q6_K = 14u,
           TYPE_IQ4_NL = 20u, TYPE_IQ4_XS = 23u, TYPE_BF16 = 30u;

const bool IS_FLOAT = WEIGHT_TYPE == TYPE_F32 || WEIGHT_TYPE == TYPE_F16 || WEIGHT_TYPE == TYPE_BF16;
const bool IS_K = WEIGHT_TYPE == TYPE_Q2_K || WEIGHT_TYPE == TYPE_Q3_K || WEIGHT_TYPE == TYPE_Q4_K ||
                  WEIGHT_TYPE == TYPE_Q5_K || WEIGHT_TYPE == TYPE_Q6_K || WEIGHT_TYPE == TYPE_IQ4_XS;
// Groups of 32 values per stored block.
const uint GROUPS_PER_BLOCK = IS_K ? 8u : 1u;
const uint BLOCK_BYTES =
    WEIGHT_TYPE == TYPE_Q8_0 ? 34u : WEIGHT_TYPE == TYPE_Q4_0 ? 18u : WEIGHT_TYPE == TYPE_Q4_1 ? 20u :
    WEIGHT_TYPE == TYPE_Q5_0 ? 22u : WEIGHT_TYPE == TYPE_Q5_1 ? 24u : WEIGHT_TYPE == TYPE_IQ4_NL ? 18u :
    WEIGHT_TYPE == TYPE_Q2_K ? 84u : WEIGHT_TYPE == TYPE_Q3_K ? 110u : WEIGHT_TYPE == TYPE_Q4_K ? 144u :
    WEIGHT_TYPE == TYPE_Q5_K ? 176u : WEIGHT_TYPE == TYPE_Q6_K ? 210u : WEIGHT_TYPE == TYPE_IQ4_XS ? 136u : 0u;
// Types whose two 16-value halves of a group have their own scales (and, Q2_K, mins).
const bool TWO_SCALES = WEIGHT_TYPE == TYPE_Q2_K || WEIGHT_TYPE == TYPE_Q3_K || WEIGHT_TYPE == TYPE_Q6_K;
// Types with an offset term: Q4_1/Q5_1 (m, against Q8_1's s), Q2_K/Q4_K/Q5_K (dmin * mins, against bsums).
const bool HAS_MIN = WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_1 || WEIGHT_TYPE == TYPE_Q2_K ||
                     WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K;

const int IQ4_NL_VALUES[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

uint w_u8(uint byte_offset) { return (weight_words[byte_offset >> 2] >> ((byte_offset & 3u) * 8u)) & 0xFFu; }
uint w_u16(uint byte_offset) { return (weight_words[byte_offset >> 2] >> ((byte_offset & 2u) * 8u)) & 0xFFFFu; }
// Four bytes at a 2-byte aligned offset.
uint w_u32(uint byte_offset) {
  const uint word = byte_offset >> 2;
  if ((byte_offset & 2u) == 0u) return weight_words[word];
  return (weight_words[word] >> 16) | (weight_words[word + 1u] << 16);
}
float w_half(uint byte_offset) { return half_bits_to_float(w_u16(byte_offset)); }
int byte_of(uint word, uint k) { return int((word >> (8u * k)) & 0xFFu); }
// Byte k of a word as a signed int8 (shifts by constants: cheaper to compile than bitfieldExtract).
int signed_byte_of(uint word, uint k) { return int(word << (24u - 8u * k)) >> 24; }

// One quantized group: value i = q[i] with the integer scale sc[i / 16] and the float multiplier d, less the
// offset term (mn[i / 16] against dm). x_i = d * sc * q_i - dm * mn, except Q4_1/Q5_1: x_i = d * q_i + dm.
struct QuantGroup {
  int q[32];
  int sc[2];
  int mn[2];
  float d;
  float dm;
};

// Q4_0-style 16 bytes at `at`: value i < 16 the low nibble of byte i, value i + 16 the high one.
void nibbles(uint at, inout int q[32]) {
  [[unroll]] for (uint k = 0u; k < 4u; ++k) {
    const uint word = w_u32(at + 4u * k);
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      q[4u * k + b] = byte_of(word, b) & 15;
      q[4u * k + b + 16u] = byte_of(word, b) >> 4;
    }
  }
}

void fifth_bits(uint bits, inout int q[32]) {
  [[unroll]] for (uint i = 0u; i < 32u; ++i) q[i] |= int((bits >> i) & 1u) << 4;
}

void decode_small(uint base, inout QuantGroup g) {
  g.sc[0] = 1; g.sc[1] = 1; g.mn[0] = 0; g.mn[1] = 0; g.dm = 0.0;
  g.d = w_half(base);
  if (WEIGHT_TYPE == TYPE_Q8_0) {
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint word = w_u32(base + 2u + 4u * k);
      [[unroll]] for (uint b = 0u; b < 4u; ++b) g.q[4u * k + b] = signed_byte_of(word, b);
    }
  } else if (WEIGHT_TYPE == TYPE_Q4_0) {
    nibbles(base + 2u, g.q);
    [[unroll]] for (uint i = 0u; i < 32u; ++i) g.q[i] -= 8;
  } else if (WEIGHT_TYPE == TYPE_Q4_1) {
    g.dm = w_half(base + 2u);
    nibbles(base + 4u, g.q);
  } else if (WEIGHT_TYPE == TYPE_Q5_0) {
    nibbles(base + 6u, g.q);
    fifth_bits(w_u32(base + 2u), g.q);
    [[unroll]] for (uint i = 0u; i < 32u; ++i) g.q[i] -= 16;
  } else if (WEIGHT_TYPE == TYPE_Q5_1) {
    g.dm = w_half(base + 2u);
    nibbles(base + 8u, g.q);
    fifth_bits(w_u32(base + 4u), g.q);
  } else if (WEIGHT_TYPE == TYPE_IQ4_NL) {
    nibbles(base + 2u, g.q);
    [[unroll]] for (uint i = 0u; i < 32u; ++i) g.q[i] = IQ4_NL_VALUES[g.q[i]];
  }
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (quant_blocks.hpp k_scale_min).
void k_scale_min(uint scales, uint j, out int scale, out int min) {
  if (j < 4u) {
    scale = int(w_u8(scales + j) & 63u);
    min = int(w_u8(scales + j + 4u) & 63u);
  } else {
    scale = int((w_u8(scales + j + 4u) & 15u) | ((w_u8(scales + j - 4u) >> 6) << 4));
    min = int((w_u8(scales + j + 4u) >> 4) | ((w_u8(scales + j) >> 6) << 4));
  }
}

int q3_k_scale(uint scales, uint s) {
  const uint low = s < 8u ? w_u8(scales + s) & 15u : w_u8(scales + s - 8u) >> 4;
  const uint high = (w_u8(scales + 8u + s % 4u) >> (2u * (s / 4u))) & 3u;
  return int(low | (high << 4)) - 32;
}

// Group j (0..7) of the K-quant superblock at `base`: values 32j .. 32j + 31.
void decode_k(uint base, uint j, inout QuantGroup g) {
  g.mn[0] = 0; g.mn[1] = 0; g.dm = 0.0;
  if (WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K) {
    g.d = w_half(base);
    g.dm = w_half(base + 2u);
    int scale, min;
    k_scale_min(base + 4u, j, scale, min);
    g.sc[0] = scale; g.sc[1] = scale; g.mn[0] = min; g.mn[1] = min;
    const uint qs = base + (WEIGHT_TYPE == TYPE_Q5_K ? 48u : 16u) + 32u * (j / 2u);
    const uint shift = 4u * (j % 2u);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint word = weight_words[(qs >> 2) + k];  // K superblocks are 16-byte aligned
      [[unroll]] for (uint b = 0u; b < 4u; ++b) g.q[4u * k + b] = (byte_of(word, b) >> shift) & 15;
    }
    if (WEIGHT_TYPE == TYPE_Q5_K) {
      [[unroll]] for (uint k = 0u; k < 8u; ++k) {
        const uint word = weight_words[((base + 16u) >> 2) + k];
        [[unroll]] for (uint b = 0u; b < 4u; ++b) g.q[4u * k + b] |= ((byte_of(word, b) >> j) & 1) << 4;
      }
    }
  } else if (WEIGHT_TYPE == TYPE_Q6_K) {
    g.d = w_half(base + 208u);
    const uint half_ = j / 4u, c = j % 4u;
    const uint ql = base + 64u * half_ + 32u * (c & 1u), qh = base + 128u + 32u * half_;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint low = w_u32(ql + 4u * k), high = w_u32(qh + 4u * k);
      [[unroll]] for (uint b = 0u; b < 4u; ++b) {
        g.q[4u * k + b] = (((byte_of(low, b) >> (4u * (c >> 1))) & 15) | (((byte_of(high, b) >> (2u * c)) & 3) << 4)) - 32;
      }
    }
    const uint sub = 8u * half_ + 2u * c;
    g.sc[0] = signed_byte_of(w_u8(base + 192u + sub), 0u);
    g.sc[1] = signed_byte_of(w_u8(base + 193u + sub), 0u);
  } else if (WEIGHT_TYPE == TYPE_Q2_K) {
    g.d = w_half(base + 80u);
    g.dm = w_half(base + 82u);
    const uint half_ = j / 4u, plane = j % 4u;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint word = weight_words[((base + 16u + 32u * half_) >> 2) + k];  // 84-byte blocks: 4-aligned
      [[unroll]] for (uint b = 0u; b < 4u; ++b) g.q[4u * k + b] = (byte_of(word, b) >> (2u * plane)) & 3;
    }
    const uint lo = w_u8(base + 2u * j), hi = w_u8(base + 2u * j + 1u);
    g.sc[0] = int(lo & 15u); g.sc[1] = int(hi & 15u);
    g.mn[0] = int(lo >> 4); g.mn[1] = int(hi >> 4);
  } else if (WEIGHT_TYPE == TYPE_Q3_K) {
    g.d = w_half(base + 108u);
    const uint half_ = j / 4u, plane = j % 4u;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint low = w_u32(base + 32u + 32u * half_ + 4u * k), mask = w_u32(base + 4u * k);
      [[unroll]] for (uint b = 0u; b < 4u; ++b) {
        g.q[4u * k + b] = ((byte_of(low, b) >> (2u * plane)) & 3) - (((byte_of(mask, b) >> j) & 1) != 0 ? 0 : 4);
      }
    }
    g.sc[0] = q3_k_scale(base + 96u, 2u * j);
    g.sc[1] = q3_k_scale(base + 96u, 2u * j + 1u);
  } else if (WEIGHT_TYPE == TYPE_IQ4_XS) {
    g.d = w_half(base);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uint word = weight_words[((base + 8u + 16u * j) >> 2) + k];  // 136-byte blocks: 8-aligned
      [[unroll]] for (uint b = 0u; b < 4u; ++b) {
        g.q[4u * k + b] = IQ4_NL_VALUES[byte_of(word, b) & 15];
        g.q[4u * k + b + 16u] = IQ4_NL_VALUES[byte_of(word, b) >> 4];
      }
    }
    const uint scale = ((w_u8(base + 4u + j / 2u) >> (4u * (j % 2u))) & 15u) | (((w_u16(base + 2u) >> (2u * j)) & 3u) << 4);
    g.sc[0] = int(scale) - 32; g.sc[1] = g.sc[0];
  }
}

// Group `group` (counting from the row's start) of a quantized row starting at byte `row_base`.
void decode_quant_group(uint row_base, uint group, inout QuantGroup g) {
  const uint block = group / GROUPS_PER_BLOCK;
  const uint base = row_base + block * BLOCK_BYTES;
  if (IS_K) {
    decode_k(base, group % GROUPS_PER_BLOCK, g);
  } else {
    decode_small(base, g);
  }
}

// Value i of a float row (F32, F16, BF16) of `cols` values starting at element `row_start`.
float float_weight(uint row_start, uint i) {
  if (WEIGHT_TYPE == TYPE_F32) return uintBitsToFloat(weight_words[row_start + i]);
  const uint h = w_u16(2u * (row_start + i));
  return WEIGHT_TYPE == TYPE_F16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
}

// The stored value i of a decoded group, as dequantize_row() computes it (the same operations in the same
// order, so get_rows gives its bits).
float dequantized_value(QuantGroup g, uint i) {
  const uint h = i / 16u;
  if (WEIGHT_TYPE == TYPE_Q6_K) return g.d * float(g.sc[h] * g.q[i]);
  if (WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_1) {
    precise float v = float(g.q[i]) * g.d;
    precise float r = v + g.dm;
    return r;
  }
  if (IS_K) {
    precise float scale = g.d * float(g.sc[h]);
    precise float v = scale * float(g.q[i]);
    precise float offset = g.dm * float(g.mn[h]);
    precise float r = v - offset;
    return r;
  }
  return float(g.q[i]) * g.d;
}

#endif
