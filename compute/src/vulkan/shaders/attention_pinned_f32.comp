// Pinned paged attention over an f32 KV storage: attention_pinned_common.glsl.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "attention_pinned_common.glsl"
