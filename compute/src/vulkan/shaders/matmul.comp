// Matrix products with weights in their stored type, partial sums added with subgroupAdd (devices with
// subgroup arithmetic; matmul_shmem.comp otherwise). The kernel: matmul_body.glsl.
#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#define MATMUL_SUBGROUP 1
#include "matmul_body.glsl"
