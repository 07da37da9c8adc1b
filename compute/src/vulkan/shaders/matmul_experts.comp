// The expert-indexed product (vulkan_experts.cpp): output row s meets the matrix of the expert its routing
// pair names, partial sums added with subgroupAdd. The kernel: matmul_body.glsl with MATMUL_EXPERTS.
#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#define MATMUL_SUBGROUP 1
#define MATMUL_EXPERTS 1
#include "matmul_body.glsl"
