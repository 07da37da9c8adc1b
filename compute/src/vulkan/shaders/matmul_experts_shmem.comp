// The expert-indexed product on devices without subgroup arithmetic: partial sums added in shared memory.
// The kernel: matmul_body.glsl with MATMUL_EXPERTS.
#version 450
#extension GL_EXT_control_flow_attributes : enable
#define MATMUL_EXPERTS 1
#include "matmul_body.glsl"
