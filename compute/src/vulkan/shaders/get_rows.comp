// Embedding lookup: out[i] = scale * row tokens[i] of the table, dequantized exactly as dequantize_row()
// does (dequant_group.glsl), in the table's stored type (specialization constant 1: the GGML type id).
// One thread per 32 values of a row (x), one grid row per token (y). An id outside the table gives zeros
// rather than a read past it.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint WEIGHT_TYPE = 2u;

layout(std430, set = 0, binding = 0) readonly buffer Table { uint weight_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer Tokens { int tokens[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Output { float out_values[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint row_bytes;
  float scale;
} p;

#include "dequant_group.glsl"

void main() {
  const uint group = gl_GlobalInvocationID.x;
  const uint i = gl_WorkGroupID.y;
  const uint first = 32u * group;
  if (first >= p.cols) return;
  const int token = tokens[i];
  const uint out_start = i * p.cols + first;
  const uint count = min(32u, p.cols - first);
  if (token < 0 || uint(token) >= p.rows) {
    for (uint k = 0u; k < count; ++k) out_values[out_start + k] = 0.0;
    return;
  }
  const uint row = uint(token);
  if (IS_FLOAT) {
    for (uint k = 0u; k < count; ++k) out_values[out_start + k] = p.scale * float_weight(row * p.cols, first + k);
    return;
  }
  QuantGroup g;
  decode_quant_group(row * p.row_bytes, group, g);
  [[unroll]] for (uint k = 0u; k < 32u; ++k) out_values[out_start + k] = p.scale * dequantized_value(g, k);
}
