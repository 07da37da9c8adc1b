// Matrix products with weights in their stored type, partial sums added in shared memory only (devices
// without subgroup arithmetic). The kernel: matmul_body.glsl.
#version 450
#extension GL_EXT_control_flow_attributes : enable
#include "matmul_body.glsl"
