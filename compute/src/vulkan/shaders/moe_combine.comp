// residual[t] += the token's chosen experts' outputs times their weights, added in choice order, then the
// shared expert's output (times sigmoid of its gate logit where gated): ExpertFeedForward::forward's last
// loop, in its order. One value per invocation, striding by the whole grid.
#version 450
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer Residual { float residual[]; };             // n rows of dim
layout(std430, set = 0, binding = 1) readonly buffer SlotOut { float slot_out[]; };     // n * used rows of dim
layout(std430, set = 0, binding = 2) readonly buffer Choices { uint choices[]; };       // (expert, weight) pairs
layout(std430, set = 0, binding = 3) readonly buffer SharedOut { float shared_out[]; }; // n rows of dim
layout(std430, set = 0, binding = 4) readonly buffer SharedGate { float shared_gate[]; };  // n logits

layout(push_constant) uniform Push {
  uint n;
  uint dim;
  uint used;
  uint shared_mode;  // 0 no shared expert, 1 one without a gate, 2 one behind a sigmoid gate
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint count = p.n * p.dim;
  for (uint i = gl_GlobalInvocationID.x; i < count; i += stride) {
    const uint t = i / p.dim, c = i % p.dim;
    const uint first = t * p.used;
    float sum = slot_out[first * p.dim + c] * uintBitsToFloat(choices[2u * first + 1u]);
    for (uint k = 1u; k < p.used; ++k) sum += slot_out[(first + k) * p.dim + c] * uintBitsToFloat(choices[2u * (first + k) + 1u]);
    if (p.shared_mode == 1u) sum += shared_out[i];
    if (p.shared_mode == 2u) sum += shared_out[i] * (1.0 / (1.0 + exp(-shared_gate[t])));
    residual[i] += sum;
  }
}
