// A check of quantize_common.glsl's correctly rounded division for the tests (tests/vulkan): for each pair
// (a, b) and each start k ulps away from the device's a / b (k = -2..2, as a device's division may be),
// out[5i + k + 2] = divide_rounded_from(a, b, start), which must be the host's a / b every time.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Pairs { vec2 pairs[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Quotients { float quotients[]; };

layout(push_constant) uniform Push {
  uint count;
} p;

#include "quantize_common.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.count) return;
  const float a = pairs[i].x, b = pairs[i].y;
  const uint bits = floatBitsToUint(a / b);
  for (int k = -2; k <= 2; ++k) {
    quotients[5u * i + uint(k + 2)] = divide_rounded_from(a, b, uintBitsToFloat(uint(int(bits) + k)));
  }
}
