// The k largest of each row of logits, one workgroup per row, as (int32 token, float logit) pairs, largest
// first and the lower token first on ties. Each element has a unique 56-bit key: its logit's bits made to sort
// as unsigned integers (-0 taken as +0), then 2^24 - 1 - token, so "larger key" is exactly the order wanted.
// A radix select finds the k-th largest key a byte at a time, most significant first: a histogram of the byte
// over the elements that match the bytes chosen so far, then the byte where the count from the top reaches
// the number still needed. It stops as soon as the chosen byte's elements are exactly those still needed
// (usually after the logit's four bytes; the token's bytes only break ties). Then every element whose key
// matches or beats the chosen prefix is one of the k: they are gathered and each one's rank is counted.
#version 450

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint out_pairs[]; };  // token, logit bits

layout(push_constant) uniform Push {
  uint vocab;  // < 2^24
  uint k;      // 1..64
} p;

const uint kMaxK = 64;
const uint kTokenMask = 0xFFFFFFu;

// Eight copies of the histogram, an invocation counting into copy tid % 8: logits crowd into a few of the
// first byte's bins, and copies spread those atomics over 8 addresses (257 apart: different banks).
const uint kCopies = 8;
const uint kCopyStride = 257;
shared uint histogram[kCopies * kCopyStride];
shared uint prefix_s[2];  // the key's chosen bytes so far: high word (logit), low word (token)
shared uint mask_s[2];
shared uint needed_s;     // elements still needed among those that match the prefix
shared bool done_s;
shared uint gathered_s;
shared uint gathered_key[kMaxK * 2];
shared uint gathered_token[kMaxK];

uint sortable(float value) {
  uint bits = floatBitsToUint(value);
  if (bits == 0x80000000u) bits = 0u;
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}

bool key_greater(uint a_high, uint a_low, uint b_high, uint b_low) {
  return a_high > b_high || (a_high == b_high && a_low > b_low);
}

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint tid = gl_LocalInvocationID.x;
  const uint base = row * p.vocab;
  if (tid == 0) {
    prefix_s[0] = 0u;
    prefix_s[1] = 0u;
    mask_s[0] = 0u;
    mask_s[1] = 0u;
    needed_s = p.k;
    done_s = false;
    gathered_s = 0u;
  }
  barrier();

  // Bytes 0..3: the logit's (word 0), 4..6: the token's (word 1, 24 bits).
  for (uint level = 0; level < 7 && !done_s; ++level) {
    const uint word = level < 4 ? 0u : 1u;
    const uint shift = level < 4 ? 24u - 8u * level : 16u - 8u * (level - 4u);
    for (uint b = tid; b < kCopies * kCopyStride; b += gl_WorkGroupSize.x) histogram[b] = 0u;
    barrier();
    const uint prefix_high = prefix_s[0], prefix_low = prefix_s[1];
    const uint mask_high = mask_s[0], mask_low = mask_s[1];
    const uint copy = (tid % kCopies) * kCopyStride;
    for (uint i = tid; i < p.vocab; i += gl_WorkGroupSize.x) {
      const uint key_high = sortable(logits[base + i]);
      const uint key_low = kTokenMask - i;
      if ((key_high & mask_high) != prefix_high || (key_low & mask_low) != prefix_low) continue;
      atomicAdd(histogram[copy + (((word == 0u ? key_high : key_low) >> shift) & 0xFFu)], 1u);
    }
    barrier();
    for (uint b = tid; b < 256; b += gl_WorkGroupSize.x) {
      for (uint c = 1; c < kCopies; ++c) histogram[b] += histogram[c * kCopyStride + b];
    }
    barrier();
    if (tid == 0) {
      uint above = 0u;
      uint chosen = 0u;
      for (int b = 255; b >= 0; --b) {
        if (above + histogram[b] >= needed_s) {
          chosen = uint(b);
          break;
        }
        above += histogram[b];
      }
      needed_s -= above;
      prefix_s[word] |= chosen << shift;
      mask_s[word] |= 0xFFu << shift;
      done_s = histogram[chosen] == needed_s;
    }
    barrier();
  }

  const uint prefix_high = prefix_s[0], prefix_low = prefix_s[1];
  const uint mask_high = mask_s[0], mask_low = mask_s[1];
  for (uint i = tid; i < p.vocab; i += gl_WorkGroupSize.x) {
    const uint key_high = sortable(logits[base + i]);
    const uint key_low = kTokenMask - i;
    if (key_greater(prefix_high, prefix_low, key_high & mask_high, key_low & mask_low)) continue;
    const uint slot = atomicAdd(gathered_s, 1u);
    if (slot < kMaxK) {
      gathered_key[2 * slot] = key_high;
      gathered_key[2 * slot + 1] = key_low;
      gathered_token[slot] = i;
    }
  }
  barrier();

  for (uint mine = tid; mine < p.k; mine += gl_WorkGroupSize.x) {
    uint rank = 0u;
    for (uint other = 0; other < p.k; ++other) {
      if (key_greater(gathered_key[2 * other], gathered_key[2 * other + 1], gathered_key[2 * mine],
                      gathered_key[2 * mine + 1])) {
        ++rank;
      }
    }
    const uint token = gathered_token[mine];
    out_pairs[2 * (row * p.k + rank)] = token;
    out_pairs[2 * (row * p.k + rank) + 1] = floatBitsToUint(logits[base + token]);
  }
}
