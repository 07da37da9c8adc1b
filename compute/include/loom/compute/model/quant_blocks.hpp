// The GGML block formats as bit-exact C++ structs, so that kernels read memory-mapped GGUF weights in place.
// A quantized row is an array of blocks; each block holds `block_elements` values (32 for the *_0, *_1 and
// IQ4_NL formats, 256 for the K-quants) as small integers plus one or two f16 scales (raw bits, see half.hpp).
//
// Value layouts, index i counting from the start of the block:
//   Q8_0: x[i] = qs[i] * d.
//   Q4_0: x[i] = (nibble - 8) * d, the nibble of value i < 16 in the low half of qs[i], of value i + 16 in the
//         high half of qs[i].
//   Q4_1: x[i] = nibble * d + m, nibbles as Q4_0's (an unsigned nibble and an f16 min instead of the -8).
//   Q5_0: x[i] = (q - 16) * d, q = Q4_0's nibble of value i | bit i of qh (a little-endian uint32) << 4.
//   Q5_1: x[i] = q * d + m, q as Q5_0's.
//   IQ4_NL: x[i] = kIQ4NLValues[nibble] * d, nibbles as Q4_0's: a fixed non-uniform 16-level table, denser
//         near zero, in place of Q4_0's evenly spaced levels.
//   Q8_1: activations only (the partner of Q4_1 and Q5_1): x[i] = qs[i] * d, and s = d * sum(qs) as f16, so
//         the weights' min term m * sum(x) costs one multiply per block.
//   Q4_K: 8 sub-blocks of 32, each with a 6-bit scale and 6-bit min (packed in `scales`, see
//         k_scale_min()). Values come in 4 chunks of 64 sharing 32 bytes of qs: value 64c + l (l < 32) is the
//         low nibble of qs[32c + l] in sub-block 2c, value 64c + 32 + l the high nibble, sub-block 2c + 1.
//         x = d * scale * q - dmin * min.
//   Q5_K: as Q4_K with a fifth bit per value: value 64c + l takes bit 2c of qh[l], value 64c + 32 + l bit
//         2c + 1 of qh[l], as bit 4 of q (so q is 0..31).
//   Q6_K: 16 sub-blocks of 16 with int8 scales, q - 32 in -32..31. Two halves of 128 values; half h uses
//         ql[64h .. 64h+63] and qh[32h .. 32h+31]. Within a half, for l < 32:
//           value 128h + l      = low  nibble of ql[64h + l]      | bits 0-1 of qh[32h + l] << 4
//           value 128h + l + 32 = low  nibble of ql[64h + l + 32] | bits 2-3 of qh[32h + l] << 4
//           value 128h + l + 64 = high nibble of ql[64h + l]      | bits 4-5 of qh[32h + l] << 4
//           value 128h + l + 96 = high nibble of ql[64h + l + 32] | bits 6-7 of qh[32h + l] << 4
//         x = d * scales[value / 16] * (q - 32).
//   Q2_K: 16 sub-blocks of 16, each with a 4-bit scale (low nibble of scales[s]) and a 4-bit min (high
//         nibble). Two halves of 128 values share 32 bytes of qs each: value 128h + 32j + l (j < 4, l < 32) is
//         bits 2j..2j+1 of qs[32h + l], q in 0..3, in sub-block 8h + 2j + l / 16.
//         x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4).
//   Q3_K: 16 sub-blocks of 16 with 6-bit scales stored + 32; q in -4..3. The low 2 bits of q sit where Q2_K's
//         do (value 128h + 32j + l: bits 2j..2j+1 of qs[32h + l]); the third bit is bit 4h + j of hmask[l],
//         and a CLEAR bit means q = low - 4 (a set bit: q = low). Scale s (0..15): low 4 bits in the low
//         nibble of scales[s] (s < 8) or the high nibble of scales[s - 8] (s >= 8); high 2 bits in bits
//         2 * (s / 4) .. 2 * (s / 4) + 1 of scales[8 + s % 4] (see q3_k_scale()).
//         x = d * (scale_s - 32) * q.
//   IQ4_XS: 8 sub-blocks of 32 with 6-bit scales stored + 32: the low 4 bits of sub-block s's in nibble s % 2
//         of scales_l[s / 2], the high 2 bits in bits 2s..2s+1 of scales_h. Sub-block s's 16 bytes qs[16s ..]
//         hold value 32s + l (l < 16) in the low nibble of qs[16s + l] and value 32s + 16 + l in the high
//         nibble; a nibble is an index into IQ4_NL's non-linear table kIQ4NLValues.
//         x = d * (scale_s - 32) * kIQ4NLValues[nibble].
//   Q8_K: activations only (the partner of the K-quants in dot products): x[i] = qs[i] * d with an f32 d, and
//         bsums[k] = sum of qs[16k .. 16k+15], precomputed so the K-quants' min/offset terms cost nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::compute {

inline constexpr std::size_t kQ8_0BlockElements = 32;
inline constexpr std::size_t kQ4_0BlockElements = 32;
inline constexpr std::size_t kKBlockElements = 256;  // every K-quant, and Q8_K

struct BlockQ8_0 {
  std::uint16_t d;  // f16
  std::int8_t qs[32];
};

struct BlockQ4_0 {
  std::uint16_t d;  // f16
  std::uint8_t qs[16];
};

struct BlockQ4_1 {
  std::uint16_t d;  // f16
  std::uint16_t m;  // f16, added to every value
  std::uint8_t qs[16];
};

struct BlockQ5_0 {
  std::uint16_t d;  // f16
  std::uint8_t qh[4];  // fifth bits, value i at bit i % 8 of qh[i / 8]
  std::uint8_t qs[16];
};

struct BlockQ5_1 {
  std::uint16_t d;  // f16
  std::uint16_t m;  // f16
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};

struct BlockIQ4_NL {
  std::uint16_t d;  // f16
  std::uint8_t qs[16];
};

struct BlockQ8_1 {
  std::uint16_t d;  // f16
  std::uint16_t s;  // f16: d * sum(qs), d before its rounding to f16
  std::int8_t qs[32];
};

// IQ4_NL's 16 levels (a fact of the format), in nibble order.
inline constexpr std::int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

struct BlockQ4_K {
  std::uint16_t d;     // f16, multiplies the 6-bit scales
  std::uint16_t dmin;  // f16, multiplies the 6-bit mins
  std::uint8_t scales[12];
  std::uint8_t qs[128];
};

struct BlockQ5_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[32];
  std::uint8_t qs[128];
};

struct BlockQ6_K {
  std::uint8_t ql[128];
  std::uint8_t qh[64];
  std::int8_t scales[16];
  std::uint16_t d;  // f16
};

struct BlockQ2_K {
  std::uint8_t scales[16];  // per 16-value sub-block: scale in the low nibble, min in the high one
  std::uint8_t qs[64];
  std::uint16_t d;     // f16, multiplies the 4-bit scales
  std::uint16_t dmin;  // f16, multiplies the 4-bit mins
};

struct BlockQ3_K {
  std::uint8_t hmask[32];
  std::uint8_t qs[64];
  std::uint8_t scales[12];
  std::uint16_t d;  // f16
};

struct BlockIQ4_XS {
  std::uint16_t d;  // f16
  std::uint16_t scales_h;
  std::uint8_t scales_l[4];
  std::uint8_t qs[128];
};

struct BlockQ8_K {
  float d;
  std::int8_t qs[256];
  std::int16_t bsums[16];
};

// Sizes are facts of the file format (they match traits(type).block_bytes; a test checks that too).
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ4_XS) == 136);
// Rows of blocks are only 2-byte aligned in files (34- and 18-byte blocks), so nothing may need more.
static_assert(alignof(BlockQ8_0) == 2 && alignof(BlockQ4_0) == 2 && alignof(BlockQ4_K) == 2 &&
              alignof(BlockQ5_K) == 2 && alignof(BlockQ6_K) == 2 && alignof(BlockQ4_1) == 2 &&
              alignof(BlockQ5_0) == 2 && alignof(BlockQ5_1) == 2 && alignof(BlockIQ4_NL) == 2 &&
              alignof(BlockQ8_1) == 2 && alignof(BlockQ2_K) == 2 && alignof(BlockQ3_K) == 2 &&
              alignof(BlockIQ4_XS) == 2);

struct KScaleMin {
  std::uint8_t scale;
  std::uint8_t min;
};

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. The first four pairs sit in the low 6
// bits of scales[0..3] (scales) and scales[4..7] (mins); the last four keep their low 4 bits in the nibbles of
// scales[8..11] and their top 2 bits in the spare top bits of scales[0..7].
constexpr KScaleMin k_scale_min(const std::uint8_t* scales, int j) noexcept {
  if (j < 4) {
    return {static_cast<std::uint8_t>(scales[j] & 63), static_cast<std::uint8_t>(scales[j + 4] & 63)};
  }
  return {static_cast<std::uint8_t>((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4)),
          static_cast<std::uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
}

// The inverse of k_scale_min() over all 8 sub-blocks: pack 6-bit scales and mins (each < 64) into 12 bytes.
constexpr void pack_k_scale_min(const std::uint8_t* scale, const std::uint8_t* min, std::uint8_t* scales) noexcept {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<std::uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<std::uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<std::uint8_t>((scale[j + 4] & 0x0F) | ((min[j + 4] & 0x0F) << 4));
  }
}

// The 6-bit scale (0..63, stored + 32) of sub-block s (0..15) of a Q3_K block: the low 4 bits in a nibble
// of scales[0..7] (the low nibbles for s < 8, the high ones for s >= 8), the high 2 bits in a bit pair of
// scales[8..11] (pair s / 4 of byte 8 + s % 4).
constexpr int q3_k_scale(const std::uint8_t* scales, int s) noexcept {
  const int low = s < 8 ? scales[s] & 0x0F : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}

// The inverse over all 16 sub-blocks: pack 6-bit scales (each < 64) into 12 bytes.
constexpr void pack_q3_k_scales(const std::uint8_t* scale, std::uint8_t* scales) noexcept {
  for (int i = 0; i < 12; ++i) scales[i] = 0;
  for (int s = 0; s < 16; ++s) {
    scales[s % 8] = static_cast<std::uint8_t>(scales[s % 8] | ((scale[s] & 0x0F) << (s < 8 ? 0 : 4)));
    scales[8 + s % 4] = static_cast<std::uint8_t>(scales[8 + s % 4] | ((scale[s] >> 4) << (2 * (s / 4))));
  }
}

// The 6-bit scale (0..63, stored + 32) of sub-block s (0..7) of an IQ4_XS block.
constexpr int iq4_xs_scale(const BlockIQ4_XS& block, int s) noexcept {
  return ((block.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F) | (((block.scales_h >> (2 * s)) & 3) << 4);
}

}  // namespace loom::compute
