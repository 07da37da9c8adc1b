#include "loom/compute/cpu/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"
#include "small_blocks.hpp"
#include "vec_dot_kernels.hpp"

namespace loom::compute {
namespace {

// Round to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves the integer in the low mantissa
// bits. Cheaper than lrintf, which is a library call without -fno-math-errno. Callers clamp the result.
inline int round_nearest(float x) {
  if (!(std::fabs(x) < 4194304.0f)) return x > 0 ? 4194304 : (x < 0 ? -4194304 : 0);  // huge, inf, NaN
  const float shifted = x + 12582912.0f;
  std::int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007FFFFF) - 0x00400000;
}

inline float max_abs(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// The value of largest magnitude, with its sign (the first one on ties).
inline float signed_max_abs(const float* x, int n) {
  float best = 0.0f, best_abs = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > best_abs) {
      best_abs = a;
      best = x[i];
    }
  }
  return best;
}

void quantize_q8_0(const float* x, BlockQ8_0* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    const float amax = max_abs(x, 32);
    // Scaled by 127/amax (not by the inverse of the f16-stored scale) and rounded half to even: exactly how
    // the reference implementation quantizes activations. Rounding any other way flips the odd value by
    // one step, which moves logits by ~1e-2 against the reference outputs.
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    blocks[b].d = float_to_half(d);
    for (int i = 0; i < 32; ++i) {
      blocks[b].qs[i] = static_cast<std::int8_t>(std::clamp(round_nearest(x[i] * id), -127, 127));
    }
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 32) {
    // Mapping the extreme value to -8 uses the one extra negative level of a 4-bit two's-complement range.
    const float d = signed_max_abs(x, 32) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_half(d);
    for (int i = 0; i < 16; ++i) {
      const int lo = std::clamp(static_cast<int>(x[i] * id + 8.5f), 0, 15);
      const int hi = std::clamp(static_cast<int>(x[i + 16] * id + 8.5f), 0, 15);
      blocks[b].qs[i] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q8_k(const float* x, BlockQ8_K* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 256) {
    BlockQ8_K& block = blocks[b];
    // The reference implementation's arithmetic: scale by -127 / (the signed value of largest magnitude),
    // store d = 1 / that scale (not max / 127: the two differ in the last bit, and d multiplies every dot).
    const float max = signed_max_abs(x, 256);
    if (max == 0.0f) {
      block.d = 0.0f;
      std::memset(block.qs, 0, sizeof block.qs);
      std::memset(block.bsums, 0, sizeof block.bsums);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < 256; ++i) block.qs[i] = static_cast<std::int8_t>(std::min(127, round_nearest(iscale * x[i])));
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * k + i];
      block.bsums[k] = static_cast<std::int16_t>(sum);
    }
    block.d = 1.0f / iscale;
  }
}

// x ~ scale * q - min over q in 0..qmax, with scale >= 0 and min >= 0 (the formats store mins unsigned and
// subtract them). Starts from the min/max range, then alternates assigning q and a least-squares fit of
// (scale, offset) while the squared error improves.
struct AffineFit {
  float scale;
  float min;
};

AffineFit fit_affine(const float* x, int n, int qmax) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (hi <= lo) return {0.0f, -lo};
  const auto error_of = [&](float scale, float offset) {
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(round_nearest((x[i] - offset) / scale), 0, qmax);
      const float diff = scale * static_cast<float>(q) + offset - x[i];
      err += diff * diff;
    }
    return err;
  };
  float best_scale = (hi - lo) / static_cast<float>(qmax), best_offset = lo;
  float best_err = error_of(best_scale, best_offset);
  for (int iteration = 0; iteration < 4; ++iteration) {
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const double q = std::clamp(round_nearest((x[i] - best_offset) / best_scale), 0, qmax);
      sq += q;
      sqq += q * q;
      sx += x[i];
      sqx += q * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    double scale = (n * sqx - sq * sx) / det;
    double offset = (sx - scale * sq) / n;
    if (offset > 0) {  // the format cannot add a positive offset: refit the scale through zero
      offset = 0;
      scale = sqq > 0 ? sqx / sqq : 0;
    }
    if (!(scale > 0)) break;
    const float err = error_of(static_cast<float>(scale), static_cast<float>(offset));
    if (!(err < best_err)) break;
    best_err = err;
    best_scale = static_cast<float>(scale);
    best_offset = static_cast<float>(offset);
  }
  return {best_scale, -best_offset};
}

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32 fitted separately, then the 8 scales and 8 mins quantized to
// 6 bits against d and dmin. Writes the final q (0..qmax) per value to `q`.
void quantize_k_affine(const float* x, int qmax, std::uint16_t& d_out, std::uint16_t& dmin_out,
                       std::uint8_t* scales_out, std::uint8_t* q) {
  AffineFit fits[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fits[j] = fit_affine(x + 32 * j, 32, qmax);
    max_scale = std::max(max_scale, fits[j].scale);
    max_min = std::max(max_min, fits[j].min);
  }
  d_out = float_to_half(max_scale / 63.0f);
  dmin_out = float_to_half(max_min / 63.0f);
  const float d = half_to_float(d_out), dmin = half_to_float(dmin_out);
  std::uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<std::uint8_t>(d > 0 ? std::clamp(round_nearest(fits[j].scale / d), 0, 63) : 0);
    mn[j] = static_cast<std::uint8_t>(dmin > 0 ? std::clamp(round_nearest(fits[j].min / dmin), 0, 63) : 0);
  }
  pack_k_scale_min(sc, mn, scales_out);
  for (int j = 0; j < 8; ++j) {
    const float scale = d * sc[j], offset = dmin * mn[j];
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (int i = 0; i < 32; ++i) {
      q[32 * j + i] = static_cast<std::uint8_t>(std::clamp(round_nearest((x[32 * j + i] + offset) * inv), 0, qmax));
    }
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* blocks, std::int64_t n_blocks) {
  std::uint8_t q[256];
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 256) {
    BlockQ4_K& block = blocks[b];
    quantize_k_affine(x, 15, block.d, block.dmin, block.scales, q);
    for (int chunk = 0; chunk < 4; ++chunk) {
      for (int l = 0; l < 32; ++l) {
        block.qs[32 * chunk + l] = static_cast<std::uint8_t>(q[64 * chunk + l] | (q[64 * chunk + 32 + l] << 4));
      }
    }
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* blocks, std::int64_t n_blocks) {
  std::uint8_t q[256];
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 256) {
    BlockQ5_K& block = blocks[b];
    quantize_k_affine(x, 31, block.d, block.dmin, block.scales, q);
    std::memset(block.qh, 0, sizeof block.qh);
    for (int chunk = 0; chunk < 4; ++chunk) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * chunk + l], hi = q[64 * chunk + 32 + l];
        block.qs[32 * chunk + l] = static_cast<std::uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
        block.qh[l] =
            static_cast<std::uint8_t>(block.qh[l] | ((lo >> 4) << (2 * chunk)) | ((hi >> 4) << (2 * chunk + 1)));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 256) {
    BlockQ6_K& block = blocks[b];
    float sub_scale[16];
    float max_scale = 0.0f;
    for (int s = 0; s < 16; ++s) {
      sub_scale[s] = signed_max_abs(x + 16 * s, 16) / -32.0f;
      max_scale = std::max(max_scale, std::fabs(sub_scale[s]));
    }
    block.d = float_to_half(max_scale / 127.0f);
    const float d = half_to_float(block.d);
    std::uint8_t q[256];
    for (int s = 0; s < 16; ++s) {
      const int sc = d > 0 ? std::clamp(round_nearest(sub_scale[s] / d), -128, 127) : 0;
      block.scales[s] = static_cast<std::int8_t>(sc);
      const float scale = d * static_cast<float>(sc);
      const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
      for (int i = 0; i < 16; ++i) {
        q[16 * s + i] = static_cast<std::uint8_t>(std::clamp(round_nearest(x[16 * s + i] * inv), -32, 31) + 32);
      }
    }
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* v = q + 128 * half;
      std::uint8_t* ql = block.ql + 64 * half;
      std::uint8_t* qh = block.qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<std::uint8_t>((v[l] & 0x0F) | ((v[l + 64] & 0x0F) << 4));
        ql[l + 32] = static_cast<std::uint8_t>((v[l + 32] & 0x0F) | ((v[l + 96] & 0x0F) << 4));
        qh[l] = static_cast<std::uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) |
                                          ((v[l + 96] >> 4) << 6));
      }
    }
  }
}

// Q2_K: per 16-value sub-block the affine fit with q in 0..3, then scales and mins quantized to 4 bits
// against d and dmin (a min that rounds to 0 is fine: the fit only ever subtracts).
void quantize_q2_k(const float* x, BlockQ2_K* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 256) {
    BlockQ2_K& block = blocks[b];
    AffineFit fits[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 16; ++s) {
      fits[s] = fit_affine(x + 16 * s, 16, 3);
      max_scale = std::max(max_scale, fits[s].scale);
      max_min = std::max(max_min, fits[s].min);
    }
    block.d = float_to_half(max_scale / 15.0f);
    block.dmin = float_to_half(max_min / 15.0f);
    const float d = half_to_float(block.d), dmin = half_to_float(block.dmin);
    std::uint8_t q[256];
    for (int s = 0; s < 16; ++s) {
      const int sc = d > 0 ? std::clamp(round_nearest(fits[s].scale / d), 0, 15) : 0;
      const int mn = dmin > 0 ? std::clamp(round_nearest(fits[s].min / dmin), 0, 15) : 0;
      block.scales[s] = static_cast<std::uint8_t>(sc | (mn << 4));
      const float scale = d * static_cast<float>(sc), offset = dmin * static_cast<float>(mn);
      const float inv = scale > 0 ? 1.0f / scale : 0.0f;
      for (int i = 0; i < 16; ++i) {
        q[16 * s + i] = static_cast<std::uint8_t>(std::clamp(round_nearest((x[16 * s + i] + offset) * inv), 0, 3));
      }
    }
    // Value 128h + 32j + l goes to bits 2j..2j+1 of qs[32h + l].
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t* v = q + 128 * half + l;
        block.qs[32 * half + l] = static_cast<std::uint8_t>(v[0] | (v[32] << 2) | (v[64] << 4) | (v[96] << 6));
      }
    }
  }
}

// The symmetric formats with a per-sub-block scale (Q3_K: levels -4..3, IQ4_XS: the kIQ4NLValues grid): the
// scale that maps the value of largest magnitude to one of a few extreme levels, whichever gives the least
// squared error. `levels` is sorted; `nearest` gives the level index nearest to a scaled value.
template <class Nearest>
float best_symmetric_scale(const float* x, int n, const int* levels, int n_levels, Nearest nearest) {
  const float max = signed_max_abs(x, n);
  if (max == 0.0f) return 0.0f;
  float best_scale = 0.0f, best_err = INFINITY;
  // Largest magnitude onto the most negative level, or onto the most positive, or a little inside either.
  const float targets[] = {static_cast<float>(levels[0]), static_cast<float>(levels[n_levels - 1]),
                           0.9f * levels[0], 0.9f * levels[n_levels - 1], 0.8f * levels[0], 1.1f * levels[n_levels - 1]};
  for (float target : targets) {
    const float scale = max / target;
    if (!(scale != 0.0f) || !std::isfinite(scale)) continue;
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - scale * static_cast<float>(levels[nearest(x[i] / scale)]);
      err += diff * diff;
    }
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
    }
  }
  return best_scale;
}

constexpr int kQ3Levels[8] = {-4, -3, -2, -1, 0, 1, 2, 3};
int nearest_q3(float v) { return std::clamp(round_nearest(v), -4, 3) + 4; }

constexpr int kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
int nearest_iq4(float v) {
  // The grid is sorted: the first level above v or the one below it.
  int hi = 0;
  while (hi < 16 && static_cast<float>(kIq4Levels[hi]) < v) ++hi;
  if (hi == 0) return 0;
  if (hi == 16) return 15;
  return v - static_cast<float>(kIq4Levels[hi - 1]) <= static_cast<float>(kIq4Levels[hi]) - v ? hi - 1 : hi;
}

// Sub-block scales to 6 bits (stored + 32, -32..31 after) against d = max |scale| / 31 (the positive side of
// the range, so that no scale clips); writes the stored values.
float quantize_sub_scales(const float* sub_scale, int n, std::uint8_t* stored) {
  float max = 0.0f;
  for (int s = 0; s < n; ++s) max = std::max(max, std::fabs(sub_scale[s]));
  const float d = half_to_float(float_to_half(max / 31.0f));
  for (int s = 0; s < n; ++s) {
    stored[s] = static_cast<std::uint8_t>((d > 0 ? std::clamp(round_nearest(sub_scale[s] / d), -32, 31) : 0) + 32);
  }
  return d;
}

void quantize_q3_k(const float* x, BlockQ3_K* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 256) {
    BlockQ3_K& block = blocks[b];
    float sub_scale[16];
    for (int s = 0; s < 16; ++s) sub_scale[s] = best_symmetric_scale(x + 16 * s, 16, kQ3Levels, 8, nearest_q3);
    std::uint8_t stored[16];
    const float d = quantize_sub_scales(sub_scale, 16, stored);
    block.d = float_to_half(d);
    pack_q3_k_scales(stored, block.scales);
    std::uint8_t q[256];  // q + 4, 0..7
    for (int s = 0; s < 16; ++s) {
      const float scale = d * static_cast<float>(stored[s] - 32);
      const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
      for (int i = 0; i < 16; ++i) q[16 * s + i] = static_cast<std::uint8_t>(nearest_q3(x[16 * s + i] * inv));
    }
    // Low 2 bits as Q2_K's; bit 2 of q + 4 (set: q >= 0) is bit 4h + j of hmask[l].
    std::memset(block.hmask, 0, sizeof block.hmask);
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t* v = q + 128 * half + l;
        block.qs[32 * half + l] =
            static_cast<std::uint8_t>((v[0] & 3) | ((v[32] & 3) << 2) | ((v[64] & 3) << 4) | ((v[96] & 3) << 6));
        for (int j = 0; j < 4; ++j) {
          block.hmask[l] = static_cast<std::uint8_t>(block.hmask[l] | ((v[32 * j] >> 2) << (4 * half + j)));
        }
      }
    }
  }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* blocks, std::int64_t n_blocks) {
  for (std::int64_t b = 0; b < n_blocks; ++b, x += 256) {
    BlockIQ4_XS& block = blocks[b];
    float sub_scale[8];
    for (int s = 0; s < 8; ++s) sub_scale[s] = best_symmetric_scale(x + 32 * s, 32, kIq4Levels, 16, nearest_iq4);
    std::uint8_t stored[8];
    const float d = quantize_sub_scales(sub_scale, 8, stored);
    block.d = float_to_half(d);
    block.scales_h = 0;
    for (int s = 0; s < 8; ++s) {
      if (s % 2 == 0) block.scales_l[s / 2] = 0;
      block.scales_l[s / 2] = static_cast<std::uint8_t>(block.scales_l[s / 2] | ((stored[s] & 0x0F) << (4 * (s % 2))));
      block.scales_h = static_cast<std::uint16_t>(block.scales_h | ((stored[s] >> 4) << (2 * s)));
      const float scale = d * static_cast<float>(stored[s] - 32);
      const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
      const float* v = x + 32 * s;
      for (int l = 0; l < 16; ++l) {
        block.qs[16 * s + l] = static_cast<std::uint8_t>(nearest_iq4(v[l] * inv) | (nearest_iq4(v[l + 16] * inv) << 4));
      }
    }
  }
}

}  // namespace

void quantize_row(TensorType type, const float* src, void* dst, std::int64_t n) {
  quantize_row(type, src, dst, n, default_kernel_path());
}

void quantize_row(TensorType type, const float* src, void* dst, std::int64_t n, KernelPath path) {
  const std::int64_t n_blocks = whole_blocks(type, n, "quantize_row");
  if (type == TensorType::q8_0 && path >= KernelPath::avx2 && kernel_path_supported(KernelPath::avx2)) {
    return detail::quantize_q8_0_avx2(src, static_cast<BlockQ8_0*>(dst), n_blocks);
  }
  switch (type) {
    case TensorType::f32:
      if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case TensorType::f16: {
      auto* h = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) h[i] = float_to_half(src[i]);
      return;
    }
    case TensorType::bf16: {
      auto* h = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) h[i] = float_to_bf16(src[i]);
      return;
    }
    case TensorType::q8_0:
      return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n_blocks);
    case TensorType::q4_0:
      return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n_blocks);
    case TensorType::q4_k:
      return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n_blocks);
    case TensorType::q5_k:
      return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n_blocks);
    case TensorType::q6_k:
      return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n_blocks);
    case TensorType::q2_k:
      return quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), n_blocks);
    case TensorType::q3_k:
      return quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), n_blocks);
    case TensorType::iq4_xs:
      return quantize_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), n_blocks);
    case TensorType::q8_k:
      return quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), n_blocks);
    case TensorType::q4_1:
      return detail::quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), n_blocks);
    case TensorType::q5_0:
      return detail::quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), n_blocks);
    case TensorType::q5_1:
      return detail::quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), n_blocks);
    case TensorType::iq4_nl:
      return detail::quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), n_blocks);
    case TensorType::q8_1:
      return detail::quantize_q8_1(src, static_cast<BlockQ8_1*>(dst), n_blocks);
    default:
      break;
  }
  throw std::invalid_argument("quantize_row: tensor type " + std::string(name(type)) + " is not supported");
}

}  // namespace loom::compute
