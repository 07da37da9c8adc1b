// The router's choice per token (vulkan_experts.cpp, route_experts): softmax over the token's expert logits
// (max subtracted), then the `used` most probable experts, ties to the lower index, each with its
// probability, divided by their sum where `normalize` says so - the CPU's ExpertFeedForward::route step for
// step. One invocation per token: a router has a few dozen to a few hundred experts, and the sequential sums
// keep the CPU's order.
#version 450
layout(local_size_x_id = 0) in;

// n rows of `experts` logits; left holding the probabilities, the chosen ones marked -1.
layout(std430, set = 0, binding = 0) buffer Logits { float logits[]; };
// n rows of `used` (int32 expert, float weight) pairs, highest weight first.
layout(std430, set = 0, binding = 1) buffer Choices { uint choices[]; };

layout(push_constant) uniform Push {
  uint n;
  uint experts;
  uint used;
  uint normalize;
} p;

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= p.n) return;
  const uint base = t * p.experts;
  float largest = logits[base];
  for (uint e = 1u; e < p.experts; ++e) largest = max(largest, logits[base + e]);
  float sum = 0.0;
  for (uint e = 0u; e < p.experts; ++e) {
    const float v = exp(logits[base + e] - largest);
    logits[base + e] = v;
    sum += v;
  }
  const float inverse = 1.0 / sum;
  for (uint e = 0u; e < p.experts; ++e) logits[base + e] *= inverse;

  // Probabilities are >= 0, so a chosen expert marked -1 is never picked again (used <= experts).
  const uint first_pair = 2u * t * p.used;
  float total = 0.0;
  for (uint k = 0u; k < p.used; ++k) {
    uint best = 0u;
    float best_p = logits[base];
    for (uint e = 1u; e < p.experts; ++e) {
      const float v = logits[base + e];
      if (v > best_p) { best = e; best_p = v; }
    }
    logits[base + best] = -1.0;
    choices[first_pair + 2u * k] = best;
    choices[first_pair + 2u * k + 1u] = floatBitsToUint(best_p);
    total += best_p;
  }
  if (p.normalize == 0u) return;
  for (uint k = 0u; k < p.used; ++k) {
    const uint at = first_pair + 2u * k + 1u;
    choices[at] = floatBitsToUint(uintBitsToFloat(choices[at]) / total);
  }
}
