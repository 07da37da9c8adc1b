#include "loom/compute/cpu/dequantize.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"
#include "small_blocks.hpp"

namespace loom::compute {
namespace {

void dequantize_q8_0(const BlockQ8_0* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 32) {
    const float d = half_to_float(blocks[b].d);
    for (int i = 0; i < 32; ++i) dst[i] = static_cast<float>(blocks[b].qs[i]) * d;
  }
}

void dequantize_q4_0(const BlockQ4_0* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 32) {
    const float d = half_to_float(blocks[b].d);
    for (int i = 0; i < 16; ++i) {
      dst[i] = static_cast<float>((blocks[b].qs[i] & 0x0F) - 8) * d;
      dst[i + 16] = static_cast<float>((blocks[b].qs[i] >> 4) - 8) * d;
    }
  }
}

// Q4_K and Q5_K share their layout of 8 sub-blocks with 6-bit scales and mins; Q5_K adds a fifth bit per
// value from qh (bit 2*chunk for the low nibbles of a 64-value chunk, 2*chunk+1 for the high ones).
template <class Block, bool kFifthBit>
void dequantize_k_affine(const Block* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const Block& block = blocks[b];
    const float d = half_to_float(block.d);
    const float dmin = half_to_float(block.dmin);
    for (int chunk = 0; chunk < 4; ++chunk, dst += 64) {
      const std::uint8_t* q = block.qs + 32 * chunk;
      const KScaleMin lo = k_scale_min(block.scales, 2 * chunk);
      const KScaleMin hi = k_scale_min(block.scales, 2 * chunk + 1);
      const float scale_lo = d * lo.scale, min_lo = dmin * lo.min;
      const float scale_hi = d * hi.scale, min_hi = dmin * hi.min;
      for (int l = 0; l < 32; ++l) {
        int q_lo = q[l] & 0x0F;
        int q_hi = q[l] >> 4;
        if constexpr (kFifthBit) {
          q_lo |= ((block.qh[l] >> (2 * chunk)) & 1) << 4;
          q_hi |= ((block.qh[l] >> (2 * chunk + 1)) & 1) << 4;
        }
        dst[l] = scale_lo * static_cast<float>(q_lo) - min_lo;
        dst[l + 32] = scale_hi * static_cast<float>(q_hi) - min_hi;
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& block = blocks[b];
    const float d = half_to_float(block.d);
    for (int half = 0; half < 2; ++half, dst += 128) {
      const std::uint8_t* ql = block.ql + 64 * half;
      const std::uint8_t* qh = block.qh + 32 * half;
      const std::int8_t* sc = block.scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int s = l / 16;  // each 32-value group spans two 16-value sub-blocks
        dst[l] = d * static_cast<float>(sc[s + 0] * q0);
        dst[l + 32] = d * static_cast<float>(sc[s + 2] * q1);
        dst[l + 64] = d * static_cast<float>(sc[s + 4] * q2);
        dst[l + 96] = d * static_cast<float>(sc[s + 6] * q3);
      }
    }
  }
}

// Q2_K and Q3_K walk their values as the format stores them: two halves of 128, four 2-bit planes of 32
// values in each half's 32 bytes of qs; value 128h + 32j + l belongs to sub-block 8h + 2j + l / 16.
void dequantize_q2_k(const BlockQ2_K* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ2_K& block = blocks[b];
    const float d = half_to_float(block.d);
    const float dmin = half_to_float(block.dmin);
    for (int half = 0; half < 2; ++half) {
      for (int j = 0; j < 4; ++j, dst += 32) {
        for (int l = 0; l < 32; ++l) {
          const std::uint8_t sm = block.scales[8 * half + 2 * j + l / 16];
          const int q = (block.qs[32 * half + l] >> (2 * j)) & 3;
          dst[l] = d * static_cast<float>(sm & 0x0F) * static_cast<float>(q) - dmin * static_cast<float>(sm >> 4);
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ3_K& block = blocks[b];
    const float d = half_to_float(block.d);
    for (int half = 0; half < 2; ++half) {
      for (int j = 0; j < 4; ++j, dst += 32) {
        for (int l = 0; l < 32; ++l) {
          const int scale = q3_k_scale(block.scales, 8 * half + 2 * j + l / 16) - 32;
          const int low = (block.qs[32 * half + l] >> (2 * j)) & 3;
          const int q = low - (((block.hmask[l] >> (4 * half + j)) & 1) ? 0 : 4);
          dst[l] = d * static_cast<float>(scale) * static_cast<float>(q);
        }
      }
    }
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const BlockIQ4_XS& block = blocks[b];
    const float d = half_to_float(block.d);
    for (int s = 0; s < 8; ++s, dst += 32) {
      const float scale = d * static_cast<float>(iq4_xs_scale(block, s) - 32);
      const std::uint8_t* q = block.qs + 16 * s;
      for (int l = 0; l < 16; ++l) {
        dst[l] = scale * static_cast<float>(kIQ4NLValues[q[l] & 0x0F]);
        dst[l + 16] = scale * static_cast<float>(kIQ4NLValues[q[l] >> 4]);
      }
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* blocks, float* dst, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, dst += 256) {
    for (int i = 0; i < 256; ++i) dst[i] = static_cast<float>(blocks[b].qs[i]) * blocks[b].d;
  }
}

}  // namespace

void dequantize_row(TensorType type, const void* src, float* dst, std::int64_t n) {
  const std::int64_t n_blocks = whole_blocks(type, n, "dequantize_row");
  switch (type) {
    case TensorType::f32:
      if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case TensorType::f16: {
      const auto* h = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = half_to_float(h[i]);
      return;
    }
    case TensorType::bf16: {
      const auto* h = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(h[i]);
      return;
    }
    case TensorType::q8_0:
      return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n_blocks);
    case TensorType::q4_0:
      return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n_blocks);
    case TensorType::q4_k:
      return dequantize_k_affine<BlockQ4_K, false>(static_cast<const BlockQ4_K*>(src), dst, n_blocks);
    case TensorType::q5_k:
      return dequantize_k_affine<BlockQ5_K, true>(static_cast<const BlockQ5_K*>(src), dst, n_blocks);
    case TensorType::q6_k:
      return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n_blocks);
    case TensorType::q2_k:
      return dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n_blocks);
    case TensorType::q3_k:
      return dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, n_blocks);
    case TensorType::iq4_xs:
      return dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n_blocks);
    case TensorType::q8_k:
      return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, n_blocks);
    case TensorType::q4_1:
      return detail::dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, n_blocks);
    case TensorType::q5_0:
      return detail::dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, n_blocks);
    case TensorType::q5_1:
      return detail::dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, n_blocks);
    case TensorType::iq4_nl:
      return detail::dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n_blocks);
    case TensorType::q8_1:
      return detail::dequantize_q8_1(static_cast<const BlockQ8_1*>(src), dst, n_blocks);
    default:
      break;
  }
  throw std::invalid_argument("dequantize_row: tensor type " + std::string(name(type)) + " is not supported");
}

}  // namespace loom::compute
