// What both attention shaders (attention_common.glsl, attention_pinned_common.glsl) read and write at bindings
// 0-5: the queries, the paged keys and values (two F16 per uint with LOOM_KV_F16, else F32), four ints of info
// per token (each shader says which), the block tables and the output; and the storage's element readers.
layout(std430, set = 0, binding = 0) readonly buffer Query { float q[]; };
#ifdef LOOM_KV_F16
layout(std430, set = 0, binding = 1) readonly buffer Keys { uint keys[]; };
layout(std430, set = 0, binding = 2) readonly buffer Values { uint values[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer Keys { float keys[]; };
layout(std430, set = 0, binding = 2) readonly buffer Values { float values[]; };
#endif
layout(std430, set = 0, binding = 3) readonly buffer TokenInfo { int token_info[]; };
layout(std430, set = 0, binding = 4) readonly buffer Tables { int tables[]; };
layout(std430, set = 0, binding = 5) writeonly buffer Out { float out_values[]; };

#ifdef LOOM_KV_F16
vec2 key_pair(uint element) { return unpackHalf2x16(keys[element / 2]); }  // element even
float key_at(uint element) {
  const vec2 pair = key_pair(element & ~1u);
  return (element & 1u) == 0u ? pair.x : pair.y;
}
float value_at(uint element) {
  const vec2 pair = unpackHalf2x16(values[element / 2]);
  return (element & 1u) == 0u ? pair.x : pair.y;
}
#else
vec2 key_pair(uint element) { return vec2(keys[element], keys[element + 1]); }
float key_at(uint element) { return keys[element]; }
float value_at(uint element) { return values[element]; }
#endif
