// The default KV cache size: a share of the memory left after the weights, capped, at least one context.
#include "loom/compute/kv_memory_budget.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace loom::compute {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// A 110M-shaped model: 12 layers x 256 K/V columns x 2 (K and V) x 2 bytes (F16) = 12 KiB a token; 1,024
// positions make one context of 12 MiB.
KvMemoryInputs machine(std::uint64_t available) {
  return KvMemoryInputs{.available_bytes = available,
                        .weight_bytes = 512 * kMiB,
                        .margin_bytes = 256 * kMiB,
                        .bytes_per_token = 12 * 1024,
                        .context_length = 1024,
                        .share = 0.25,
                        .max_sequences = 0,
                        .max_bytes = 0,
                        .min_bytes = 16 * 12 * 1024,
                        .contexts_when_unknown = 4};
}

TEST(KvMemoryBudget, TakesTheShareOfWhatIsLeftAfterTheWeightsAndTheMargin) {
  const KvMemoryBudget budget = kv_budget_from_memory(machine(2816 * kMiB));  // 2,048 MiB left
  EXPECT_EQ(budget.bytes, 512 * kMiB);
  EXPECT_EQ(budget.reason, "512 MiB = 25 % of 2,048 MiB available after the weights (2,816 MiB available - "
                           "512 MiB weights - 256 MiB margin)");
}

TEST(KvMemoryBudget, IsCappedByTheSequencesThatCanRunAtOnce) {
  auto in = machine(64 * kGiB);
  in.max_sequences = 64;  // 64 x 12 MiB = 768 MiB, far below a quarter of 63 GiB
  const KvMemoryBudget budget = kv_budget_from_memory(in);
  EXPECT_EQ(budget.bytes, 768 * kMiB);
  EXPECT_EQ(budget.reason, "768 MiB: 25 % of 64,768 MiB available after the weights (65,536 MiB available - 512 MiB "
                           "weights - 256 MiB margin) is 16,192 MiB, capped at 768 MiB = 64 concurrent sequences x "
                           "one full context of 12 MiB");
}

TEST(KvMemoryBudget, IsCappedByTheCeilingOnALargeMachine) {
  auto in = machine(1024 * kGiB);
  in.max_sequences = 1 << 20;
  in.max_bytes = 16 * kGiB;
  const KvMemoryBudget budget = kv_budget_from_memory(in);
  EXPECT_EQ(budget.bytes, 16 * kGiB);
  EXPECT_NE(budget.reason.find("capped at the ceiling of 16,384 MiB"), std::string::npos) << budget.reason;
}

TEST(KvMemoryBudget, IsRaisedToOneFullContextWhenTheMemoryHoldsIt) {
  auto in = machine(768 * kMiB + 40 * kMiB);  // 40 MiB left: a quarter is 10 MiB, one context 12 MiB
  const KvMemoryBudget budget = kv_budget_from_memory(in);
  EXPECT_EQ(budget.bytes, 12 * kMiB);
  EXPECT_NE(budget.reason.find("raised to one full context of 12 MiB"), std::string::npos) << budget.reason;

  in.max_bytes = 1 * kMiB;  // one context also wins over the ceiling
  EXPECT_EQ(kv_budget_from_memory(in).bytes, 12 * kMiB);
}

TEST(KvMemoryBudget, StaysBelowOneContextWhenTheMemoryDoesNotHoldIt) {
  const KvMemoryBudget budget = kv_budget_from_memory(machine(768 * kMiB + 8 * kMiB));  // 8 MiB left
  EXPECT_EQ(budget.bytes, 2 * kMiB);
  EXPECT_NE(budget.reason.find("less than one full context of 12 MiB"), std::string::npos) << budget.reason;
}

TEST(KvMemoryBudget, NeverBelowTheLeastUsableSize) {
  const KvMemoryBudget budget = kv_budget_from_memory(machine(100 * kMiB));  // less than the weights
  EXPECT_EQ(budget.bytes, 16u * 12 * 1024);
  EXPECT_NE(budget.reason.find("raised to the least usable size"), std::string::npos) << budget.reason;
}

TEST(KvMemoryBudget, UnknownMemoryFallsBackToWholeContexts) {
  auto in = machine(0);
  const KvMemoryBudget budget = kv_budget_from_memory(in);
  EXPECT_EQ(budget.bytes, 48 * kMiB);
  EXPECT_NE(budget.reason.find("unknown"), std::string::npos) << budget.reason;
  in.max_sequences = 2;
  EXPECT_EQ(kv_budget_from_memory(in).bytes, 24 * kMiB);
}

TEST(KvMemoryBudget, RefusesInputsWithoutMeaning) {
  auto in = machine(kGiB);
  in.share = 0.0;
  EXPECT_THROW(kv_budget_from_memory(in), std::invalid_argument);
  in = machine(kGiB);
  in.bytes_per_token = 0;
  EXPECT_THROW(kv_budget_from_memory(in), std::invalid_argument);
  in = machine(kGiB);
  in.context_length = 0;
  EXPECT_THROW(kv_budget_from_memory(in), std::invalid_argument);
}

TEST(KvMemoryBudget, MibTextGroupsThousands) {
  EXPECT_EQ(mib_text(0), "0 MiB");
  EXPECT_EQ(mib_text(kMiB / 4), "0.25 MiB");
  EXPECT_EQ(mib_text(2048 * kMiB), "2,048 MiB");
  EXPECT_EQ(mib_text(1024 * kGiB), "1,048,576 MiB");
}

}  // namespace
}  // namespace loom::compute
