// The second pass of a split attention (attention_common.glsl): for each (token, head), the splits' sums
// rescaled to the largest of their maxima, out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s. One workgroup
// per (head, token), its invocations over the head's dimensions.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Partials { float partials[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float out_values[]; };

layout(push_constant) uniform Push {
  uint heads;
  uint head_dim;
  uint splits;
} p;

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint token = gl_WorkGroupID.y;
  const uint stride = p.head_dim + 2;
  const uint base = (token * p.heads + head) * p.splits * stride;
  float top = partials[base + p.head_dim];
  for (uint s = 1; s < p.splits; ++s) top = max(top, partials[base + s * stride + p.head_dim]);
  float denominator = 0.0;
  for (uint s = 0; s < p.splits; ++s) {
    denominator += exp(partials[base + s * stride + p.head_dim] - top) * partials[base + s * stride + p.head_dim + 1];
  }
  for (uint d = gl_LocalInvocationID.x; d < p.head_dim; d += gl_WorkGroupSize.x) {
    float sum = 0.0;
    for (uint s = 0; s < p.splits; ++s) {
      sum += exp(partials[base + s * stride + p.head_dim] - top) * partials[base + s * stride + d];
    }
    out_values[(token * p.heads + head) * p.head_dim + d] = denominator > 0.0 ? sum / denominator : 0.0;
  }
}
