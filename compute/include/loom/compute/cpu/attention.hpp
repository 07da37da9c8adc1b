// Attention of one query head over the keys and values of positions [0, positions) (or the last ones, its
// sliding window): scores, softmax, the weighted sum of values. Also the SwiGLU activation, whose
// exponential shares this file's exp().
//
// Keys and values are read through a block table (the paged KV cache, paged_kv_cache.hpp): position p lives
// in slot p % block_size of block block_table[p / block_size] of the storage. Within a block, keys are rows
// (slot after slot, `stride` elements apart); values are rows too, or transposed (dimension after dimension,
// each a run of block_size slots), the layout the forward pass uses, so that the weighted sum, which runs
// along positions, reads contiguous runs. Only the addresses come from the table and the layout; which
// positions are summed, and in what order, does not depend on them, so a sequence's attention gives the same
// bits however its blocks are scattered and laid out (and equals the contiguous layout's, which is the table
// 0, 1, 2, ... with rows).
//
// The arithmetic is pinned, not just "close": it is the arithmetic of the widely used reference
// implementation in ../shared/reference as it runs on an AVX-512 x86 machine (or on an AVX2 one: LaneWidth,
// at the end of this comment), reproduced bit for bit so that
// our logits sit on top of its logits instead of drifting away through activations that round the other way.
// The query is rounded to F16 (what an F16 dot product does with an F32 operand); the scores are F32 dot
// products summed in fixed 16-lane orders; the exponentials come from a vectorised expf (vector_expf) for
// whole groups of 16 positions and the C library's expf for the rest; the softmax sum is taken per 16
// positions in float and across groups in double; the probabilities are multiplied by the reciprocal of the
// sum and rounded to F16 before they weight the values.
//
// The reference attends over a view of its KV cache padded to a multiple of 32 cells (capped at the cache
// size), the cells past the sequence masked out: `span` (reference_span()). Padding adds only zeros, but it
// decides which of the reference's kernels and lane layouts run, so it is part of the order.
//
// Two summation orders exist, because the reference uses two kernels. Sixteen lanes below means a float
// accumulator per lane, each lane's terms added by FMA in position order, the lanes then summed as the tree
// ((l0+l8) + (l4+l12)) + ... of an AVX-512 horizontal add (sum_16_lanes in attention.cpp).
// - SumOrder::vector_dot (one query, a decode step): a dot of length n sums its first n - n % 64 terms in
//   four 16-lane accumulators (element i in accumulator (i / 16) % 4, lane i % 16), folded as
//   (a0 + a2) + (a1 + a3), then adds the remaining terms one by one in double. Scores are such dots over the
//   head, weighted values over the span (positions past the sequence add zeros).
// - SumOrder::tiled (a batch of queries): one 16-lane accumulator per dot, when the dot's length is a
//   multiple of 16 (scores: head_dim, and the span a multiple of 4; values: the span); otherwise the
//   vector_dot order.
// Scalar and AVX2 paths give identical bits. (Pinned by experiment against ../shared/reference: with these
// orders every logit of every prompt position and greedy step of aidreams260K and of synth11M Q8_0, Q4_0
// and Q6_K matches the reference to its print precision; with a 16-, 256- or unpadded span, or the
// AVX2-style exp, some do not.)
//
// Prefill tiles (HeadAttention::queries > 1; the AVX2 path, for the tiled order with values transposed):
// a tile of a prompt's consecutive queries (attention_tile_queries(), times the group's heads: the rows)
// walks the keys eight positions at a time, each position's key converted to float once for every row,
// each (row, position) score its own 16-lane dot as above, eight scores' lanes summed together by a
// transposition (the same tree). Each row then takes its own softmax over its own positions (causal: a
// later query sees more), whole before any exponential as the reference normalises by the row's maximum,
// so a tile holds rows x span scores: never an n x n matrix, and no online (flash) softmax, whose single
// pass rounds differently. The values go in chunks of kTileValueChunk positions converted to float once,
// each row's 16 lanes per output running along them; positions a row does not see weigh 0 and add +0.
// Otherwise (the scalar path, the vector_dot order, values in rows) a tile is its queries one at a time.
//
// A sliding window (HeadAttention::window) and soft-capped scores (HeadAttention::softcap, applied to each
// score after the scale, before the softmax) change which positions count and what a score is, never an
// order: a window's loops start at its first position rounded down to 64, so every position keeps its lane,
// and the positions before the window are neither read nor summed (the masked reference adds zeros there).
//
// F32 keys and values (a KV cache stored in F32) take the same orders without the F16 roundings (of the
// query, the keys, the values and the probabilities): close to the F16 results, not equal to them.
//
// The reference's orders depend on the vector width it was built for (HeadAttention::lanes): the above is its
// AVX-512 build. Its AVX2 build (LaneWidth::avx2) has 8 lanes where the AVX-512 one has 16, everywhere:
// - vector_dot: four 8-lane accumulators over the first n - n % 32 terms (element i in accumulator
//   (i / 8) % 4, lane i % 8), folded (a0 + a2) + (a1 + a3), the lanes summed as two horizontal adds,
//   ((l0+l4) + (l1+l5)) + ((l2+l6) + (l3+l7)), then the rest in double (its ggml_vec_dot_f16);
// - tiled: one 8-lane accumulator when the length is a multiple of 8, the lanes summed as
//   ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)) (its tinyBLAS<8> kernel and hsum);
// - softmax: the AVX2 vectorised expf (avx2_expf()) over whole groups of 8 positions, each group's
//   sum in float as the tiled lanes above, across groups in double.
// Pinned by the shared references made on an AVX2 machine (synth-gemma-q8_0, synthq320-q4_1 and -iq4_xs
// match them to print precision in these orders, and drift by 0.05-0.08 in the AVX-512 ones).
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/compute/cpu/kernel_path.hpp"
#include "loom/compute/tensor_type.hpp"

namespace loom::compute {

enum class SumOrder : std::uint8_t { vector_dot, tiled };
// Whose orders to follow: the reference built for AVX-512 (16 lanes) or for AVX2 (8 lanes). Both kernel paths
// compute either, with the same bits.
enum class LaneWidth : std::uint8_t { avx512, avx2 };

struct HeadAttention {
  const float* query = nullptr;         // head_dim values for each of query_heads, one after another
  const void* keys = nullptr;           // of kv_type; see below for where each position's row starts
  const void* values = nullptr;
  TensorType kv_type = TensorType::f16;  // f16 or f32
  std::size_t stride = 0;               // elements from one slot's row to the next slot's, >= head_dim
  // Position p is in slot p % block_size of block block_table[p / block_size]; without a table (nullptr)
  // in slot p of block 0. The table must cover every position and name only blocks that exist: the caller
  // checks. Block b starts b * block_stride elements after keys (and after values).
  const std::int32_t* block_table = nullptr;
  std::int64_t block_size = 0;          // >= 1 when there is a table
  std::size_t block_stride = 0;         // 0: block_size * stride (blocks of rows, one after another)
  // Keys are rows: element d of position p at keys + block start + slot * stride + d. Values are rows the
  // same way, or, when transposed (a table is then required), at values + block start + d * block_size + slot.
  bool values_transposed = false;
  std::int64_t positions = 0;           // >= 1
  std::int64_t head_dim = 0;
  float scale = 1.0f;                   // applied to every score before the softmax
  // Query heads that share these keys and values (a group of grouped-query attention): each is attended as if
  // alone, but their turns interleave over the keys, so those are read from memory once for the group.
  std::int64_t query_heads = 1;
  // Consecutive queries of one sequence (a prompt's tokens in one step), attended as a tile: query i
  // (0 <= i < queries) attends positions [0, positions + i) (causal: `positions` is the first one's), its
  // query_heads rows at query + i * query_stride, its outputs at out + i * out_stride. Each query's bits are
  // those it gets alone (see "Prefill tiles" above); the tile only reads each key and value once for all.
  std::int64_t queries = 1;
  std::size_t query_stride = 0;         // floats from one query's rows to the next's
  std::size_t out_stride = 0;           // floats from one query's outputs to the next's
  // Sliding window (0: none): a query that sees positions [0, n) attends only its last `window` of them,
  // [n - window, n); so in a tile each query has its own window start. Positions before the first query's
  // window start are never read (neither keys nor values, nor their block-table entries), and every
  // position keeps the lane it has without a window, so the result is full attention's with those positions
  // masked out (probability 0), bit for bit.
  std::int64_t window = 0;
  float softcap = 0.0f;                 // > 0: each scaled score s becomes softcap * tanh(s / softcap) (gemma2)
  SumOrder order = SumOrder::vector_dot;
  LaneWidth lanes = LaneWidth::avx512;   // whose orders: the reference built for AVX-512 or for AVX2 (above)
  std::int64_t span = 0;                // cells of the reference's KV view, >= the last query's positions; 0: those
  float* scores = nullptr;              // scratch of attention_scratch_floats(max(span, positions), head_dim, query_heads, queries)
  float* out = nullptr;                 // head_dim values for each query head
};

// The first position a query that sees positions [0, n) attends under the head's window.
constexpr std::int64_t window_start(const HeadAttention& head, std::int64_t n) noexcept {
  return head.window > 0 && n > head.window ? n - head.window : 0;
}

// The reference's KV view for a sequence whose last position is used - 1: used rounded up to a multiple of
// 32 cells, at most its cache's `capacity` cells (the model's context), never fewer than used.
constexpr std::int64_t reference_span(std::int64_t used, std::int64_t capacity) noexcept {
  const std::int64_t padded = (used + 31) / 32 * 32;
  return padded < capacity ? padded : (capacity > used ? capacity : used);
}

// Positions of values a prefill tile converts to float at a time, and queries per tile for a group of
// `query_heads`: sixteen rows of scores (16 measured faster than 8 on the 110M shape: the loads and
// conversions are shared by twice the rows), rows x context floats of scratch per thread.
inline constexpr std::int64_t kTileValueChunk = 128;
constexpr std::int64_t attention_tile_queries(std::int64_t query_heads) noexcept {
  return query_heads >= 16 ? 1 : 16 / query_heads;
}

// Scratch one HeadAttention needs (positions: the last query's, or the span if more): per query head and
// query the scores (padded to whole 16-position groups) and the rounded query, then each position's storage
// offset (64 bits a position), then per query head and query 64 rows of partial sums for the weighted values;
// a tile (queries > 1) also holds eight positions' keys and a chunk of values as floats.
constexpr std::size_t attention_scratch_floats(std::int64_t positions, std::int64_t head_dim,
                                               std::int64_t query_heads = 1, std::int64_t queries = 1) noexcept {
  const std::int64_t rows = query_heads * queries;
  const std::int64_t tile = queries > 1 ? (8 + kTileValueChunk) * head_dim : 0;
  return static_cast<std::size_t>(rows * ((positions + 15) / 16 * 16 + head_dim + 64 * ((head_dim + 7) / 8 * 8)) +
                                  2 * positions + tile);
}

void attend(const HeadAttention& head, KernelPath path);
void attend(const HeadAttention& head);  // default_kernel_path()

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)) with the same exp() as the softmax for
// whole groups of 16 and the C library's expf for the rest (again the reference's arithmetic, its AVX-512 build).
// LaneWidth::avx2: its AVX2 build's form instead, whole groups of 8 through avx2_expf.
void swiglu(float* gate, const float* up, std::int64_t n, KernelPath path, LaneWidth lanes = LaneWidth::avx512);
void swiglu(float* gate, const float* up, std::int64_t n);

// dst[i] = float_to_half(src[i]) for i < n: keys and values entering an F16 cache, eight at a time with F16C
// on the AVX2 path (the same bits: both round to nearest even).
void store_as_f16(const float* src, std::uint16_t* dst, std::int64_t n, KernelPath path);

// The vectorised expf, one lane's worth: x = n ln 2 + b, e^b ~ 1 + p(b) (a degree-5 polynomial) rounded to
// float, then scaled by 2^n with one rounding (the reference's AVX-512 exp, whose result can differ from its
// AVX2 one in the last bit). Within 2 ulp of expf; 0 below about -104, +inf above about 88.7.
float vector_expf(float x) noexcept;

// The reference's AVX2 expf (LaneWidth::avx2), one lane's worth: the same reduction, but the polynomial
// without its constant term, then 2^n + 2^n p(b) with one rounding (an FMA); 2^n is scaled in two steps
// beyond |n| > 126, and |n| > 192 is 0 or inf.
float avx2_expf(float x) noexcept;
// out[i] = avx2_expf(x[i]) for i < n, eight lanes at a time on the AVX2 path (the same bits).
void avx2_expf(const float* x, float* out, std::int64_t n, KernelPath path);

// out[i] = vector_expf(x[i]) for i < n, eight lanes at a time on the AVX2 path (the same bits).
void vector_expf(const float* x, float* out, std::int64_t n, KernelPath path);

}  // namespace loom::compute
