// Writes n tokens' keys and values into the paged KV storage (f16): [block][kv_head][slot][head_dim], token t's
// slot being slots[t] = block * block_size + slot (a negative slot is skipped). One pair of dimensions per
// invocation, striding by the whole grid.
#version 450
#define LOOM_KV_F16 1
#extension GL_GOOGLE_include_directive : require

#include "store_kv_common.glsl"
