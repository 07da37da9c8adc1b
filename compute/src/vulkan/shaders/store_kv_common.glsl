// The body of store_kv_f16.comp (LOOM_KV_F16 defined: two F16 per uint, rounded as the CPU's float_to_half) and
// store_kv_f32.comp.
#include "ops_half.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 1) readonly buffer V { float v[]; };
layout(std430, set = 0, binding = 2) readonly buffer Slots { int slots[]; };
#ifdef LOOM_KV_F16
layout(std430, set = 0, binding = 3) writeonly buffer Keys { uint keys[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Values { uint values[]; };
#else
layout(std430, set = 0, binding = 3) writeonly buffer Keys { float keys[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Values { float values[]; };
#endif

layout(push_constant) uniform Push {
  uint count;  // n * kv_heads * head_dim / 2 pairs
  uint kv_heads;
  uint head_dim;
  uint block_size;
} p;

void main() {
  const uint pairs = p.head_dim / 2;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint index = gl_GlobalInvocationID.x; index < p.count; index += stride) {
    const uint row = index / pairs;  // token * kv_heads + kv_head
    const uint d = 2 * (index - row * pairs);
    const uint token = row / p.kv_heads;
    const uint kv_head = row - token * p.kv_heads;
    const int slot_id = slots[token];
    if (slot_id < 0) continue;
    const uint block = uint(slot_id) / p.block_size;
    const uint slot = uint(slot_id) - block * p.block_size;
    const uint destination = ((block * p.kv_heads + kv_head) * p.block_size + slot) * p.head_dim + d;
    const uint source = row * p.head_dim + d;
#ifdef LOOM_KV_F16
    keys[destination / 2] = ops_float_to_half(k[source]) | (ops_float_to_half(k[source + 1]) << 16);
    values[destination / 2] = ops_float_to_half(v[source]) | (ops_float_to_half(v[source + 1]) << 16);
#else
    keys[destination] = k[source];
    keys[destination + 1] = k[source + 1];
    values[destination] = v[source];
    values[destination + 1] = v[source + 1];
#endif
  }
}
