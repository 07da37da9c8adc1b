// The KV cache's default size, from the machine: a share of the memory available after the weights,
// capped by what the server can use (its concurrent sequences times the model's context) and by an absolute
// ceiling, and never less than one full context where memory allows. A plain function of its inputs, so
// that the rule is tested without depending on the memory of the machine the tests run on; a backend
// calls it at load (LoadOptions::kv_auto) with MemAvailable, the model file's size and its bytes per token.
//
// Why a share and not "everything left", as vLLM's gpu_memory_utilization does (0.9 of a dedicated GPU,
// 0.92 in recent versions, less the weights and the activations' peak): on a CPU the memory is shared with
// the operating system, the page cache that keeps the mapped weights resident, and other processes, and
// the cache is written in full at load, so it is committed memory.
// llama.cpp's server sizes its KV cache by context (-c, split among -np slots) whatever the machine has;
// that is the fallback here when the available memory cannot be read.
#pragma once

#include <cstdint>
#include <string>

namespace loom::compute {

struct KvMemoryInputs {
  std::uint64_t available_bytes = 0;  // memory a new allocation can take without swapping; 0: unknown
  std::uint64_t weight_bytes = 0;     // the model file, memory-mapped: it must stay resident as well
  std::uint64_t margin_bytes = 0;     // kept free besides the weights (scratch buffers, the server's own)
  std::uint64_t bytes_per_token = 0;  // K and V of every layer, > 0
  std::int64_t context_length = 0;    // the model's context, > 0
  double share = 0.25;                // of the memory available after the weights and the margin, (0, 1]
  std::int64_t max_sequences = 0;     // cap: this many full contexts, the most the server runs at once (0: none)
  std::uint64_t max_bytes = 0;        // absolute cap (0: none)
  std::uint64_t min_bytes = 0;        // the least that is usable (one block)
  std::int64_t contexts_when_unknown = 4;  // full contexts when available_bytes is 0
};

struct KvMemoryBudget {
  std::uint64_t bytes = 0;
  std::string reason;  // how `bytes` was chosen, for the log: "512 MiB = 25 % of 2,048 MiB available after ..."
};

// Throws std::invalid_argument when bytes_per_token or context_length is not positive or share is outside (0, 1].
KvMemoryBudget kv_budget_from_memory(const KvMemoryInputs& in);

// `bytes` in MiB with thousands separators ("2,048 MiB"), rounded down; fractions below 1 MiB as "0.25 MiB".
std::string mib_text(std::uint64_t bytes);

// MemAvailable from /proc/meminfo (Linux), else the free physical pages; 0 when neither is known.
std::uint64_t available_memory_bytes_or_zero();

}  // namespace loom::compute
