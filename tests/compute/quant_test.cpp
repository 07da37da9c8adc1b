// Block formats, dequantization and quantization on synthetic data. dequantize_row() is checked block by
// block against references written from the format description in a different style (reading the packed
// fields as a little-endian bit stream, one field at a time), on blocks of random bits; quantize_row() is
// checked by its round-trip error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <stdexcept>
#include <vector>

#include "loom/compute/cpu/dequantize.hpp"
#include "loom/compute/cpu/quantize.hpp"
#include "loom/compute/model/half.hpp"
#include "loom/compute/model/quant_blocks.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {
namespace {

// `count` bits starting at bit `first` of a little-endian bit stream (bit k is bit k % 8 of byte k / 8).
int bits(const std::uint8_t* bytes, int first, int count) {
  int v = 0;
  for (int k = 0; k < count; ++k) {
    const int bit = first + k;
    v |= ((bytes[bit / 8] >> (bit % 8)) & 1) << k;
  }
  return v;
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::mt19937& rng) {
  std::vector<std::uint8_t> v(n);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : v) b = static_cast<std::uint8_t>(byte(rng));
  return v;
}

std::uint16_t random_scale(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  return float_to_half(u(rng));
}

void put_u16(std::uint8_t* at, std::uint16_t v) { std::memcpy(at, &v, 2); }
float f16_at(const std::uint8_t* at) {
  std::uint16_t v;
  std::memcpy(&v, at, 2);
  return half_to_float(v);
}

// The 6-bit scale (which = 0) or min (which = 1) of sub-block j, from the bit positions of the K-quant
// scale layout: j < 4 in bits 0-5 of byte j (scale) / j + 4 (min); j >= 4 split into a low nibble of byte
// j + 4 (scale: bits 0-3, min: bits 4-7) and two high bits in bits 6-7 of byte j - 4 (scale) / j (min).
int k_field(const std::uint8_t* scales, int j, int which) {
  if (j < 4) return bits(scales, 8 * (j + 4 * which), 6);
  const int low = bits(scales, 8 * (j + 4) + 4 * which, 4);
  const int high = bits(scales, 8 * (which == 0 ? j - 4 : j) + 6, 2);
  return low | (high << 4);
}

// References: value i of one block, straight from the format description. Offsets are byte offsets in the
// GGML block (d first for all but Q6_K).
double ref_q8_0(const std::uint8_t* blk, int i) {
  return static_cast<std::int8_t>(blk[2 + i]) * static_cast<double>(f16_at(blk));
}
double ref_q4_0(const std::uint8_t* blk, int i) {
  const int nibble = bits(blk + 2, 8 * (i % 16) + 4 * (i / 16), 4);
  return (nibble - 8) * static_cast<double>(f16_at(blk));
}
// Q4_1, Q5_0, Q5_1, IQ4_NL: `qs_at` is the byte offset of the nibbles, `qh_at` that of the fifth bits (a
// 32-bit little-endian field, bit i for value i) or 0 for 4-bit types.
int ref_small_level(const std::uint8_t* blk, int i, int qs_at, int qh_at) {
  int q = bits(blk + qs_at, 8 * (i % 16) + 4 * (i / 16), 4);
  if (qh_at != 0) q |= bits(blk + qh_at, i, 1) << 4;
  return q;
}
double ref_q4_1(const std::uint8_t* blk, int i) {
  return ref_small_level(blk, i, 4, 0) * static_cast<double>(f16_at(blk)) + f16_at(blk + 2);
}
double ref_q5_0(const std::uint8_t* blk, int i) {
  return (ref_small_level(blk, i, 6, 2) - 16) * static_cast<double>(f16_at(blk));
}
double ref_q5_1(const std::uint8_t* blk, int i) {
  return ref_small_level(blk, i, 8, 4) * static_cast<double>(f16_at(blk)) + f16_at(blk + 2);
}
double ref_iq4_nl(const std::uint8_t* blk, int i) {
  // The format's 16 levels, written out here again rather than taken from the header under test.
  static constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return kLevels[ref_small_level(blk, i, 2, 0)] * static_cast<double>(f16_at(blk));
}
double ref_q8_1(const std::uint8_t* blk, int i) {
  return static_cast<std::int8_t>(blk[4 + i]) * static_cast<double>(f16_at(blk));
}
double ref_k_affine(const std::uint8_t* blk, int i, bool fifth_bit) {
  const std::uint8_t* scales = blk + 4;
  const std::uint8_t* qh = blk + 16;
  const std::uint8_t* qs = fifth_bit ? blk + 48 : blk + 16;
  const int chunk = i / 64, l = i % 32, upper = (i % 64) / 32, sub = i / 32;
  int q = bits(qs, 8 * (32 * chunk + l) + 4 * upper, 4);
  if (fifth_bit) q |= bits(qh, 8 * l + 2 * chunk + upper, 1) << 4;
  return static_cast<double>(f16_at(blk)) * k_field(scales, sub, 0) * q -
         static_cast<double>(f16_at(blk + 2)) * k_field(scales, sub, 1);
}
double ref_q6_k(const std::uint8_t* blk, int i) {
  const std::uint8_t* ql = blk;
  const std::uint8_t* qh = blk + 128;
  const auto* scales = reinterpret_cast<const std::int8_t*>(blk + 192);
  const int half = i / 128, r = i % 128, group = r / 32, l = r % 32;
  const int low = bits(ql, 8 * (64 * half + l + 32 * (group % 2)) + 4 * (group / 2), 4);
  const int high = bits(qh, 8 * (32 * half + l) + 2 * group, 2);
  return static_cast<double>(f16_at(blk + 208)) * scales[i / 16] * ((low | (high << 4)) - 32);
}
// Q2_K and Q3_K: value i = 128h + 32j + l takes the bit pair 2j of byte 32h + l of qs, sub-block i / 16.
int k_low2(const std::uint8_t* qs, int i) {
  const int half = i / 128, j = (i % 128) / 32, l = i % 32;
  return bits(qs, 8 * (32 * half + l) + 2 * j, 2);
}
double ref_q2_k(const std::uint8_t* blk, int i) {
  const int scale = bits(blk, 8 * (i / 16), 4), min = bits(blk, 8 * (i / 16) + 4, 4);
  return static_cast<double>(f16_at(blk + 80)) * scale * k_low2(blk + 16, i) -
         static_cast<double>(f16_at(blk + 82)) * min;
}
// Q3_K's 6-bit scale s from the bit stream: low nibble in byte s % 8 (bits 0-3 for s < 8, 4-7 after), high
// bit pair s / 4 of byte 8 + s % 4.
int q3_field(const std::uint8_t* scales, int s) {
  return bits(scales, 8 * (s % 8) + 4 * (s / 8), 4) | (bits(scales, 8 * (8 + s % 4) + 2 * (s / 4), 2) << 4);
}
double ref_q3_k(const std::uint8_t* blk, int i) {
  const int group = i / 32, l = i % 32;  // the high bit: bit `group` of hmask[l]
  const int q = k_low2(blk + 32, i) + 4 * bits(blk, 8 * l + group, 1) - 4;
  return static_cast<double>(f16_at(blk + 108)) * (q3_field(blk + 96, i / 16) - 32) * q;
}
double ref_iq4_xs(const std::uint8_t* blk, int i) {
  static constexpr int kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  const int s = i / 32, l = i % 16, upper = (i % 32) / 16;
  const int scale = bits(blk + 4, 4 * s, 4) | (bits(blk + 2, 2 * s, 2) << 4);
  return static_cast<double>(f16_at(blk)) * (scale - 32) * kGrid[bits(blk + 8, 8 * (16 * s + l) + 4 * upper, 4)];
}
double ref_q8_k(const std::uint8_t* blk, int i) {
  float d;
  std::memcpy(&d, blk, 4);
  return static_cast<double>(d) * static_cast<std::int8_t>(blk[4 + i]);
}

struct RefCase {
  TensorType type;
  double (*value)(const std::uint8_t*, int);
  void (*randomize_scales)(std::uint8_t*, std::mt19937&);  // make the float fields finite and modest
};

void fix_d_first(std::uint8_t* blk, std::mt19937& rng) { put_u16(blk, random_scale(rng)); }
void fix_d_dmin(std::uint8_t* blk, std::mt19937& rng) {
  put_u16(blk, random_scale(rng));
  put_u16(blk + 2, random_scale(rng));
}
void fix_q6_k(std::uint8_t* blk, std::mt19937& rng) { put_u16(blk + 208, random_scale(rng)); }
void fix_q2_k(std::uint8_t* blk, std::mt19937& rng) {
  put_u16(blk + 80, random_scale(rng));
  put_u16(blk + 82, random_scale(rng));
}
void fix_q3_k(std::uint8_t* blk, std::mt19937& rng) { put_u16(blk + 108, random_scale(rng)); }
void fix_q8_k(std::uint8_t* blk, std::mt19937& rng) {
  const float d = std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng);
  std::memcpy(blk, &d, 4);
}

void PrintTo(const RefCase& c, std::ostream* os) { *os << name(c.type); }

class DequantizeReference : public ::testing::TestWithParam<RefCase> {};

TEST_P(DequantizeReference, MatchesBitLevelReferenceOnRandomBlocks) {
  const RefCase& c = GetParam();
  const auto& t = traits(c.type);
  std::mt19937 rng(static_cast<unsigned>(c.type) * 101 + 3);
  const int n_blocks = 64;
  std::vector<std::uint8_t> data = random_bytes(t.block_bytes * n_blocks, rng);
  for (int b = 0; b < n_blocks; ++b) c.randomize_scales(data.data() + b * t.block_bytes, rng);
  std::vector<float> out(t.block_elements * n_blocks, std::nanf(""));
  dequantize_row(c.type, data.data(), out.data(), static_cast<std::int64_t>(out.size()));
  for (int b = 0; b < n_blocks; ++b) {
    const std::uint8_t* blk = data.data() + b * t.block_bytes;
    for (std::size_t i = 0; i < t.block_elements; ++i) {
      const double expected = c.value(blk, static_cast<int>(i));
      // Float evaluation of d * scale * q - dmin * min can round differently from double; nothing else.
      ASSERT_NEAR(out[b * t.block_elements + i], expected, 1e-6 * (std::fabs(expected) + 1e-3))
          << name(c.type) << " block " << b << " value " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dequant, DequantizeReference,
    ::testing::Values(
        RefCase{TensorType::q8_0, ref_q8_0, fix_d_first}, RefCase{TensorType::q4_0, ref_q4_0, fix_d_first},
        RefCase{TensorType::q4_k, [](const std::uint8_t* b, int i) { return ref_k_affine(b, i, false); }, fix_d_dmin},
        RefCase{TensorType::q5_k, [](const std::uint8_t* b, int i) { return ref_k_affine(b, i, true); }, fix_d_dmin},
        RefCase{TensorType::q6_k, ref_q6_k, fix_q6_k}, RefCase{TensorType::q8_k, ref_q8_k, fix_q8_k},
        RefCase{TensorType::q4_1, ref_q4_1, fix_d_dmin}, RefCase{TensorType::q5_0, ref_q5_0, fix_d_first},
        RefCase{TensorType::q5_1, ref_q5_1, fix_d_dmin}, RefCase{TensorType::iq4_nl, ref_iq4_nl, fix_d_first},
        RefCase{TensorType::q8_1, ref_q8_1, fix_d_dmin}, RefCase{TensorType::q2_k, ref_q2_k, fix_q2_k},
        RefCase{TensorType::q3_k, ref_q3_k, fix_q3_k}, RefCase{TensorType::iq4_xs, ref_iq4_xs, fix_d_first}),
    [](const ::testing::TestParamInfo<RefCase>& case_info) { return std::string(name(case_info.param.type)); });

TEST(QuantBlocks, SizesMatchTensorTypeTraits) {
  EXPECT_EQ(sizeof(BlockQ8_0), traits(TensorType::q8_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_0), traits(TensorType::q4_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_K), traits(TensorType::q4_k).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_K), traits(TensorType::q5_k).block_bytes);
  EXPECT_EQ(sizeof(BlockQ6_K), traits(TensorType::q6_k).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_K), traits(TensorType::q8_k).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_1), traits(TensorType::q4_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_0), traits(TensorType::q5_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_1), traits(TensorType::q5_1).block_bytes);
  EXPECT_EQ(sizeof(BlockIQ4_NL), traits(TensorType::iq4_nl).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_1), traits(TensorType::q8_1).block_bytes);
  // The GGML sizes, from the format (not from the structs): d, m, qh, qs.
  EXPECT_EQ(traits(TensorType::q4_1).block_bytes, 2u + 2 + 16);
  EXPECT_EQ(traits(TensorType::q5_0).block_bytes, 2u + 4 + 16);
  EXPECT_EQ(traits(TensorType::q5_1).block_bytes, 2u + 2 + 4 + 16);
  EXPECT_EQ(traits(TensorType::iq4_nl).block_bytes, 2u + 16);
  EXPECT_EQ(traits(TensorType::q8_1).block_bytes, 2u + 2 + 32);
  for (TensorType t : {TensorType::q4_1, TensorType::q5_0, TensorType::q5_1, TensorType::iq4_nl, TensorType::q8_1}) {
    EXPECT_EQ(traits(t).block_elements, 32u) << name(t);
    EXPECT_TRUE(traits(t).computable) << name(t);
  }
  ASSERT_NE(find_tensor_type(20), nullptr);  // IQ4_NL's GGML id
  EXPECT_EQ(find_tensor_type(20)->type, TensorType::iq4_nl);
  EXPECT_EQ(find_tensor_type(20)->name, "iq4_nl");
  EXPECT_EQ(offsetof(BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(BlockQ5_1, qs), 8u);
  EXPECT_EQ(offsetof(BlockQ8_1, qs), 4u);
  EXPECT_EQ(sizeof(BlockQ2_K), traits(TensorType::q2_k).block_bytes);
  EXPECT_EQ(sizeof(BlockQ3_K), traits(TensorType::q3_k).block_bytes);
  EXPECT_EQ(sizeof(BlockIQ4_XS), traits(TensorType::iq4_xs).block_bytes);
  for (TensorType type : {TensorType::q2_k, TensorType::q3_k, TensorType::iq4_xs}) {
    EXPECT_EQ(kKBlockElements, traits(type).block_elements) << name(type);
    EXPECT_TRUE(traits(type).computable) << name(type);
  }
  ASSERT_NE(find_tensor_type(23), nullptr);  // IQ4_XS's GGML id
  EXPECT_EQ(find_tensor_type(23)->type, TensorType::iq4_xs);
  EXPECT_EQ(name(TensorType::iq4_xs), "iq4_xs");
  EXPECT_EQ(traits(TensorType::q2_k).block_bytes, 84u);
  EXPECT_EQ(traits(TensorType::q3_k).block_bytes, 110u);
  EXPECT_EQ(traits(TensorType::iq4_xs).block_bytes, 136u);
  EXPECT_EQ(kQ8_0BlockElements, traits(TensorType::q8_0).block_elements);
  EXPECT_EQ(kQ4_0BlockElements, traits(TensorType::q4_0).block_elements);
  EXPECT_EQ(kKBlockElements, traits(TensorType::q4_k).block_elements);
  EXPECT_EQ(kKBlockElements, traits(TensorType::q8_k).block_elements);
  // Field offsets, as the format has them.
  EXPECT_EQ(offsetof(BlockQ4_K, scales), 4u);
  EXPECT_EQ(offsetof(BlockQ4_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qh), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qs), 48u);
  EXPECT_EQ(offsetof(BlockQ6_K, qh), 128u);
  EXPECT_EQ(offsetof(BlockQ6_K, scales), 192u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
  EXPECT_EQ(offsetof(BlockQ8_K, qs), 4u);
  EXPECT_EQ(offsetof(BlockQ8_K, bsums), 260u);
  EXPECT_EQ(offsetof(BlockQ2_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ2_K, d), 80u);
  EXPECT_EQ(offsetof(BlockQ2_K, dmin), 82u);
  EXPECT_EQ(offsetof(BlockQ3_K, qs), 32u);
  EXPECT_EQ(offsetof(BlockQ3_K, scales), 96u);
  EXPECT_EQ(offsetof(BlockQ3_K, d), 108u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, scales_h), 2u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, scales_l), 4u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, qs), 8u);
}

TEST(QuantBlocks, Q3KScalesUnpackWhatPackWrote) {
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> six(0, 63);
  for (int round = 0; round < 1000; ++round) {
    std::uint8_t sc[16], packed[12];
    for (auto& v : sc) v = static_cast<std::uint8_t>(six(rng));
    pack_q3_k_scales(sc, packed);
    for (int s = 0; s < 16; ++s) {
      ASSERT_EQ(q3_k_scale(packed, s), sc[s]) << "sub-block " << s;
      ASSERT_EQ(q3_field(packed, s), sc[s]) << "sub-block " << s;  // and the bit-stream reading agrees
    }
  }
}

TEST(QuantBlocks, KScaleMinUnpacksWhatPackWrote) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> six(0, 63);
  for (int round = 0; round < 1000; ++round) {
    std::uint8_t sc[8], mn[8], packed[12];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<std::uint8_t>(six(rng));
      mn[j] = static_cast<std::uint8_t>(six(rng));
    }
    pack_k_scale_min(sc, mn, packed);
    for (int j = 0; j < 8; ++j) {
      const KScaleMin sm = k_scale_min(packed, j);
      ASSERT_EQ(sm.scale, sc[j]);
      ASSERT_EQ(sm.min, mn[j]);
      ASSERT_EQ(k_field(packed, j, 0), sc[j]);  // and the bit-stream reading agrees
      ASSERT_EQ(k_field(packed, j, 1), mn[j]);
    }
  }
}

TEST(Dequantize, PlainTypes) {
  const std::vector<float> values = {1.5f, -2.25f, 0.0f, 65504.0f, -1e-3f};
  std::vector<float> out(values.size());
  dequantize_row(TensorType::f32, values.data(), out.data(), 5);
  EXPECT_EQ(out, values);
  std::vector<std::uint16_t> halves, bf16s;
  for (float v : values) {
    halves.push_back(float_to_half(v));
    bf16s.push_back(float_to_bf16(v));
  }
  dequantize_row(TensorType::f16, halves.data(), out.data(), 5);
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i], half_to_float(halves[i]));
  dequantize_row(TensorType::bf16, bf16s.data(), out.data(), 5);
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i], bf16_to_float(bf16s[i]));
}

TEST(Dequantize, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<std::uint8_t> src(1024);
  std::vector<float> dst(512);
  EXPECT_THROW(dequantize_row(TensorType::q4_0, src.data(), dst.data(), 33), std::invalid_argument);
  EXPECT_THROW(dequantize_row(TensorType::q6_k, src.data(), dst.data(), 128), std::invalid_argument);
  EXPECT_THROW(dequantize_row(TensorType::q2_k, src.data(), dst.data(), 128), std::invalid_argument);
  EXPECT_THROW(dequantize_row(TensorType::iq4_xs, src.data(), dst.data(), 32), std::invalid_argument);
  EXPECT_THROW(dequantize_row(TensorType::q8_0, src.data(), dst.data(), -32), std::invalid_argument);
  EXPECT_THROW(dequantize_row(TensorType::i16, src.data(), dst.data(), 32), std::invalid_argument);
  EXPECT_THROW(dequantize_row(TensorType::q5_1, src.data(), dst.data(), 48), std::invalid_argument);
  EXPECT_THROW(dequantize_row(static_cast<TensorType>(99), src.data(), dst.data(), 32), std::invalid_argument);
  try {
    dequantize_row(TensorType::i16, src.data(), dst.data(), 256);
    FAIL() << "i16 is not supported";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("i16"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(dequantize_row(TensorType::q4_0, src.data(), dst.data(), 0));
}

TEST(Quantize, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<float> src(512, 1.0f);
  std::vector<std::uint8_t> dst(4096);
  EXPECT_THROW(quantize_row(TensorType::q8_0, src.data(), dst.data(), 31), std::invalid_argument);
  EXPECT_THROW(quantize_row(TensorType::q8_k, src.data(), dst.data(), 32), std::invalid_argument);
  EXPECT_THROW(quantize_row(TensorType::i16, src.data(), dst.data(), 32), std::invalid_argument);
  EXPECT_THROW(quantize_row(TensorType::iq4_nl, src.data(), dst.data(), 16), std::invalid_argument);
}

// Round trip of Gaussian data: the error relative to the data's RMS, and per-value bounds where the format
// guarantees one (symmetric formats: about half a step, Q4_0 a full step because +max may clip at 7).
struct RoundTripCase {
  TensorType type;
  double max_relative_rms;  // rms(error) / rms(x)
};

void PrintTo(const RoundTripCase& c, std::ostream* os) { *os << name(c.type); }

class QuantizeRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(QuantizeRoundTrip, ErrorWithinFormatBounds) {
  const RoundTripCase& c = GetParam();
  const auto& t = traits(c.type);
  const std::int64_t n = 256 * 64;
  std::mt19937 rng(static_cast<unsigned>(c.type) + 17);
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<float> x(n);
  for (auto& v : x) v = gauss(rng);
  x[5] = 0.2f;  // an outlier
  std::vector<std::uint8_t> q(*tensor_bytes(c.type, n));
  quantize_row(c.type, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(c.type, q.data(), y.data(), n);
  double err2 = 0, x2 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    err2 += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
    x2 += x[i] * static_cast<double>(x[i]);
  }
  const double rel = std::sqrt(err2 / x2);
  EXPECT_LT(rel, c.max_relative_rms) << name(c.type);
  RecordProperty("relative_rms", std::to_string(rel));
  // Per-value bounds for the formats with a single scale per block.
  const std::size_t be = t.block_elements;
  for (std::int64_t b = 0; b < n / static_cast<std::int64_t>(be); ++b) {
    double amax = 0;
    for (std::size_t i = 0; i < be; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[b * be + i])));
    double bound = 0;
    // Q8_0 quantizes with the exact d = amax / 127 but stores it as f16 (relative error up to 2^-11, times
    // |q| <= 127 on dequantization).
    if (c.type == TensorType::q8_0) bound = (0.5 + 127.0 / 2048) * amax / 127 * 1.001;
    if (c.type == TensorType::q8_k) bound = 0.5 * amax / 127 * 1.0001;
    if (c.type == TensorType::q4_0) bound = amax / 8 * 1.002;
    if (c.type == TensorType::q5_0) bound = amax / 16 * 1.002;  // as Q4_0 with twice the levels
    if (c.type == TensorType::q8_1) bound = (0.5 + 127.0 / 2048) * amax / 127 * 1.001;
    if (c.type == TensorType::q4_1 || c.type == TensorType::q5_1) {
      // Half a step of the block's range (d and m are f16: a little more).
      double lo = x[b * be], hi = x[b * be];
      for (std::size_t i = 0; i < be; ++i) {
        lo = std::min(lo, static_cast<double>(x[b * be + i]));
        hi = std::max(hi, static_cast<double>(x[b * be + i]));
      }
      bound = 0.5 * (hi - lo) / (c.type == TensorType::q4_1 ? 15 : 31) * 1.01 + amax / 1024;
    }
    if (bound == 0) continue;
    for (std::size_t i = 0; i < be; ++i) {
      ASSERT_LE(std::fabs(x[b * be + i] - y[b * be + i]), bound + 1e-9)
          << name(c.type) << " block " << b << " value " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Quant, QuantizeRoundTrip,
    ::testing::Values(RoundTripCase{TensorType::f16, 0.0005}, RoundTripCase{TensorType::bf16, 0.004},
                      RoundTripCase{TensorType::q8_0, 0.01}, RoundTripCase{TensorType::q8_k, 0.012},
                      RoundTripCase{TensorType::q4_0, 0.12}, RoundTripCase{TensorType::q4_k, 0.10},
                      RoundTripCase{TensorType::q5_k, 0.05}, RoundTripCase{TensorType::q6_k, 0.025},
                      RoundTripCase{TensorType::q4_1, 0.12}, RoundTripCase{TensorType::q5_0, 0.06},
                      RoundTripCase{TensorType::q5_1, 0.06}, RoundTripCase{TensorType::iq4_nl, 0.11},
                      RoundTripCase{TensorType::q8_1, 0.01}, RoundTripCase{TensorType::q2_k, 0.30},
                      RoundTripCase{TensorType::q3_k, 0.17}, RoundTripCase{TensorType::iq4_xs, 0.09}),
    [](const ::testing::TestParamInfo<RoundTripCase>& case_info) { return std::string(name(case_info.param.type)); });

TEST(Quantize, Q8KBsumsAreSubBlockSums) {
  std::mt19937 rng(3);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(512);
  for (auto& v : x) v = gauss(rng);
  std::vector<BlockQ8_K> q(2);
  quantize_row(TensorType::q8_k, x.data(), q.data(), 512);
  for (const auto& block : q) {
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) {
        sum += block.qs[16 * k + i];
        ASSERT_NE(block.qs[16 * k + i], -128) << "activations must stay in -127..127";
      }
      EXPECT_EQ(block.bsums[k], sum);
    }
  }
}

// Q8_1 activations: q as Q8_0 (127 / amax, never -128) and s = d * sum(q) with d = amax / 127 before its
// rounding to f16 (the reference's s, which carries Q4_1/Q5_1's min term).
TEST(Quantize, Q8_1CarriesTheScaledSum) {
  std::mt19937 rng(9);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(256);
  for (auto& v : x) v = gauss(rng) + 0.3f;
  std::vector<BlockQ8_1> q(8);
  std::vector<BlockQ8_0> q0(8);
  quantize_row(TensorType::q8_1, x.data(), q.data(), 256);
  quantize_row(TensorType::q8_0, x.data(), q0.data(), 256);
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(x[32 * b + i]));
      sum += q[b].qs[i];
      ASSERT_EQ(q[b].qs[i], q0[b].qs[i]) << "block " << b << " value " << i;
    }
    EXPECT_EQ(q[b].d, q0[b].d);
    EXPECT_EQ(q[b].s, float_to_half(amax / 127.0f * static_cast<float>(sum))) << "block " << b;
  }
}

TEST(Quantize, ZerosAndConstantsAreExact) {
  for (TensorType type :
       {TensorType::q8_0, TensorType::q4_0, TensorType::q4_k, TensorType::q5_k, TensorType::q6_k, TensorType::q8_k,
        TensorType::q4_1, TensorType::q5_0, TensorType::q5_1, TensorType::iq4_nl, TensorType::q8_1,
        TensorType::q2_k, TensorType::q3_k, TensorType::iq4_xs}) {
    for (float value : {0.0f, 0.5f, -0.25f}) {
      std::vector<float> x(512, value), y(512, 42.0f);
      std::vector<std::uint8_t> q(*tensor_bytes(type, 512));
      quantize_row(type, x.data(), q.data(), 512);
      dequantize_row(type, q.data(), y.data(), 512);
      for (int i = 0; i < 512; ++i) ASSERT_NEAR(y[i], value, std::fabs(value) * 2e-3) << name(type) << " " << value;
    }
  }
}

TEST(Quantize, Q4_0MapsTheLargestMagnitudeToMinusEight) {
  std::vector<float> x(32, 0.0f);
  x[3] = -1.6f;
  x[20] = 0.8f;
  BlockQ4_0 block;
  quantize_row(TensorType::q4_0, x.data(), &block, 32);
  // d = -1.6 / -8 = 0.2 (stored as f16); q = x / d + 8 rounded: -1.6 -> 0, 0.8 -> 12, 0 -> 8.
  EXPECT_EQ(block.d, float_to_half(0.2f));
  EXPECT_EQ(block.qs[3] & 0x0F, 0);
  EXPECT_EQ(block.qs[4] >> 4, 12);  // value 20 is the high nibble of byte 4
  EXPECT_EQ(block.qs[0] & 0x0F, 8);
  EXPECT_EQ(block.qs[0] >> 4, 8);
}

}  // namespace
}  // namespace loom::compute
