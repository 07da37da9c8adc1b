// y[t][r] = W[r] . x[t] for a tile of ROWS weight rows x TOKENS tokens per workgroup: each 32-value group
// of a weight row is decoded once and met by every token of the tile (prefill reads the weights once per
// tile, not once per token), each activation quant is extracted once for all the tile's rows, and the
// workgroup's threads split a row's groups, then add their partial sums (matmul.comp: subgroupAdd,
// matmul_shmem.comp: shared memory only).
//
// Arithmetic per group, as the CPU kernels (compute/src/cpu/vec_dot.cpp) and the reference compute a block:
// exact integer dots of weight quants with activation quants, times the integer sub-block scales, then one
// float multiply by the block scales; the groups' results summed in F32 (so results differ from the CPU's
// only in the order of the float additions).
//
// Bindings: 0 the weights (raw bytes as uint words), 1 the prepared activations (vulkan_matmul.cpp: F32
// rows, or the quantized layout of quantize_*.comp), 2 y (n rows of `rows` F32 values).
//
// MATMUL_EXPERTS (matmul_experts*.comp, vulkan_experts.cpp): the expert-indexed product. The weights are
// `experts` matrices of `rows` rows back to back; output row s (a token's choice slot, `slots` of them) meets
// the matrix of the expert that binding 3's (expert, weight) pair s names and activation row
// s / slots_per_input (n activation rows), s = first_slot + workgroup y. Only with TOKENS = 1: every output row
// has its own matrix.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint WEIGHT_TYPE = 2u;
layout(constant_id = 2) const uint ROWS = 2u;    // weight rows per workgroup (<= MAX_ROWS)
layout(constant_id = 3) const uint TOKENS = 1u;  // tokens per workgroup (<= MAX_TOKENS)

const uint MAX_ROWS = 4u, MAX_TOKENS = 8u;

layout(std430, set = 0, binding = 0) readonly buffer Weights { uint weight_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer Activations { uint act_words[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Output { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint n;            // tokens
  uint row_bytes;    // bytes of one weight row
  uint tiles_x;      // workgroups along x (row tiles = tiles_x * z + x)
#ifdef MATMUL_EXPERTS
  uint slots;            // output rows
  uint slots_per_input;  // output rows per activation row
  uint experts;          // matrices in the weights
  uint first_slot;       // of this dispatch (workgroup row y is slot first_slot + y)
#endif
} p;

#ifdef MATMUL_EXPERTS
layout(std430, set = 0, binding = 3) readonly buffer Choices { uint choice_words[]; };  // (int32 expert, float)
// The first weight row of output row s's matrix (an id past the last expert reads the last one: no stray reads).
uint first_weight_row(uint s) { return min(choice_words[2u * s], p.experts - 1u) * p.rows; }
uint input_row(uint s) { return s / p.slots_per_input; }
uint output_rows() { return p.slots; }
uint first_output_row() { return p.first_slot; }
#else
uint first_weight_row(uint t) { return 0u; }
uint input_row(uint t) { return t; }
uint output_rows() { return p.n; }
uint first_output_row() { return 0u; }
#endif

#include "dequant_group.glsl"
#include "quantize_layout.glsl"

float act_float(uint word) { return uintBitsToFloat(act_words[word]); }

const uint ACT = IS_FLOAT ? ACT_F32 : (WEIGHT_TYPE == TYPE_Q4_1 || WEIGHT_TYPE == TYPE_Q5_1) ? ACT_Q8_1 :
                 IS_K ? ACT_Q8_K : ACT_Q8_0;

// The tile's weight groups: one per row, decoded once per group index and met by every token of the tile.
QuantGroup tile_groups[MAX_ROWS];

// tile_groups[r].q . token t's 32 activation quants at word `at`, for every row r, as (first 16, last 16):
// each activation byte is sign-extended once and multiplied into all the tile's rows.
void tile_int_dots(uint at, out ivec2 dots[MAX_ROWS]) {
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) dots[r] = ivec2(0);
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    const uint word = act_words[at + k];
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      const int a = signed_byte_of(word, b);
      [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
        if (k < 4u) dots[r].x += tile_groups[r].q[4u * k + b] * a; else dots[r].y += tile_groups[r].q[4u * k + b] * a;
      }
    }
  }
}

// A decoded group (number `group` of its row) with its integer dots against token t, scaled: the
// block scales, the sub-block scales and the min terms of the activation format.
float scaled_group_dot(QuantGroup g, ivec2 dots, uint t, uint group) {
  const QuantLayout layout_ = quant_layout(ACT, p.n, p.cols);
  if (ACT == ACT_Q8_K) {
    const float da = act_float(layout_.scales + t * (p.cols / 256u) + group / 8u);
    const int scaled = TWO_SCALES ? g.sc[0] * dots.x + g.sc[1] * dots.y : g.sc[0] * (dots.x + dots.y);
    if (!HAS_MIN) return (g.d * da) * float(scaled);
    const uint bsums = layout_.extra + t * (p.cols / 16u) + 2u * group;
    const int mins = g.mn[0] * int(act_words[bsums]) + g.mn[1] * int(act_words[bsums + 1u]);
    precise float r = da * (g.d * float(scaled) - g.dm * float(mins));
    return r;
  }
  const float da = act_float(layout_.scales + t * (p.cols / 32u) + group);
  precise float r = (g.d * da) * float(dots.x + dots.y);
  if (ACT == ACT_Q8_1) r += g.dm * act_float(layout_.extra + t * (p.cols / 32u) + group);
  return r;
}

// Float weights (F32, F16, BF16): the tile's rows' 32 values of a group, converted once per group index
// (zeros past the row's end), met by each token's F32 activations.
float tile_floats[MAX_ROWS][32];

void decode_float_groups(uint tile, uint group) {
  const uint first = 32u * group;
  const uint count = min(32u, p.cols - first);
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
    const uint row_start = min(tile * ROWS + r, p.rows - 1u) * p.cols;
    [[unroll]] for (uint i = 0u; i < 32u; ++i) tile_floats[r][i] = i < count ? float_weight(row_start, first + i) : 0.0;
  }
}

// Decode (one token): each row's group against the token straight from the weights (no register tile to
// fill: measurably faster on lavapipe at n = 1, and the same reads).
float float_group_dot(uint row, uint t, uint group) {
  const uint first = 32u * group;
  const uint count = min(32u, p.cols - first);
  const uint row_start = row * p.cols, act_start = t * p.cols + first;
  float sum = 0.0;
  for (uint i = 0u; i < count; ++i) sum += float_weight(row_start, first + i) * uintBitsToFloat(act_words[act_start + i]);
  return sum;
}

void float_tile_dots(uint t, uint group, out float dots[MAX_ROWS]) {
  const uint first = 32u * group;
  const uint count = min(32u, p.cols - first);
  const uint at = t * p.cols + first;
  [[unroll]] for (uint r = 0u; r < ROWS; ++r) dots[r] = 0.0;
  [[unroll]] for (uint i = 0u; i < 32u; ++i) {
    const float a = i < count ? uintBitsToFloat(act_words[at + i]) : 0.0;
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) dots[r] += tile_floats[r][i] * a;
  }
}

// Each thread's running sums, one per (row, token) of the tile, in shared memory rather than registers: the
// token loop then stays a loop (a tile of 8 tokens unrolled made the shader 8 times as large, and its
// compilation on lavapipe the slowest part of a test), and a sum's read-modify-write per 32-value group is
// small beside the group's 32 multiply-adds. Sum k of thread i sits at [k * WORKGROUP + i]: consecutive
// threads, consecutive banks. Sized for 64 threads x 4 rows x 8 tokens (8 KiB).
const uint WORKGROUP = gl_WorkGroupSize.x;
shared float sums[64u * MAX_ROWS * MAX_TOKENS];

void accumulate(uint tile, uint token0) {
  const uint groups = IS_FLOAT ? (p.cols + 31u) / 32u : p.cols / 32u;
  const uint tokens = min(TOKENS, output_rows() - token0);
  const uint me = gl_LocalInvocationID.x;
  for (uint k = 0u; k < ROWS * TOKENS; ++k) sums[k * WORKGROUP + me] = 0.0;
  if (IS_FLOAT && TOKENS == 1u) {
    for (uint r = 0u; r < ROWS; ++r) {
      const uint row = tile * ROWS + r;
      if (row >= p.rows) break;
      const uint weight_row = first_weight_row(token0) + row, input_at = input_row(token0);
      for (uint group = me; group < groups; group += WORKGROUP) sums[r * WORKGROUP + me] += float_group_dot(weight_row, input_at, group);
    }
    return;
  }
  if (IS_FLOAT) {
    for (uint group = me; group < groups; group += WORKGROUP) {
      decode_float_groups(tile, group);
      for (uint t = 0u; t < tokens; ++t) {
        float dots[MAX_ROWS];
        float_tile_dots(token0 + t, group, dots);
        [[unroll]] for (uint r = 0u; r < ROWS; ++r) sums[(r * TOKENS + t) * WORKGROUP + me] += dots[r];
      }
    }
    return;
  }
  // A tile past the last row decodes the last row again for the missing ones (never written): no branches.
  const uint last_row = p.rows - 1u, first_row = first_weight_row(token0);
  for (uint group = me; group < groups; group += WORKGROUP) {
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) decode_quant_group((first_row + min(tile * ROWS + r, last_row)) * p.row_bytes, group, tile_groups[r]);
    for (uint t = 0u; t < tokens; ++t) {
      ivec2 dots[MAX_ROWS];
      const uint input_at = input_row(token0 + t);
      tile_int_dots(qs_word(p.cols, input_at, group), dots);
      [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
        sums[(r * TOKENS + t) * WORKGROUP + me] += scaled_group_dot(tile_groups[r], dots[r], input_at, group);
      }
    }
  }
}

void write_result(uint tile, uint token0, uint k, float value) {
  const uint row = tile * ROWS + k / TOKENS, t = token0 + k % TOKENS;
  if (row < p.rows && t < output_rows()) y[t * p.rows + row] = value;
}

#ifdef MATMUL_SUBGROUP
// Each subgroup adds its threads' sums (subgroupAdd), then one thread per output adds the subgroups'.
// Subgroups of at least 4 threads (the host checks), so at most 16 per workgroup.
shared float subgroup_sums[16u * MAX_ROWS * MAX_TOKENS];

void reduce_and_write(uint tile, uint token0) {
  const uint outputs = ROWS * TOKENS;
  barrier();
  for (uint k = 0u; k < outputs; ++k) {
    const float s = subgroupAdd(sums[k * WORKGROUP + gl_LocalInvocationID.x]);
    if (subgroupElect()) subgroup_sums[gl_SubgroupID * outputs + k] = s;
  }
  barrier();
  for (uint k = gl_LocalInvocationID.x; k < outputs; k += WORKGROUP) {
    float sum = 0.0;
    for (uint s = 0u; s < gl_NumSubgroups; ++s) sum += subgroup_sums[s * outputs + k];
    write_result(tile, token0, k, sum);
  }
}
#else
// A tree over the threads in shared memory (the workgroup size is a power of two).
void reduce_and_write(uint tile, uint token0) {
  const uint outputs = ROWS * TOKENS;
  const uint me = gl_LocalInvocationID.x;
  barrier();
  for (uint stride = WORKGROUP / 2u; stride > 0u; stride /= 2u) {
    if (me < stride) {
      for (uint k = 0u; k < outputs; ++k) sums[k * WORKGROUP + me] += sums[k * WORKGROUP + me + stride];
    }
    barrier();
  }
  for (uint k = me; k < outputs; k += WORKGROUP) write_result(tile, token0, k, sums[k * WORKGROUP]);
}
#endif

void main() {
  const uint tile = gl_WorkGroupID.x + gl_WorkGroupID.z * p.tiles_x;
  if (tile * ROWS >= p.rows) return;  // the whole workgroup: the last z slice's spare tiles
  const uint token0 = first_output_row() + gl_WorkGroupID.y * TOKENS;
  accumulate(tile, token0);
  reduce_and_write(tile, token0);
}
