// Pinned paged attention over an f16 KV storage: attention_pinned_common.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require
#define LOOM_KV_F16 1

#include "attention_pinned_common.glsl"
