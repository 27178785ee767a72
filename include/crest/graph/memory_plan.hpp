// Activation memory planning: one arena, blocks placed by liveness over the forward+backward
// schedule so tensors that are never alive at the same time share bytes.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace crest {

struct PlanBlock {
  std::string what;  // "conv1:out", "grad conv1:out", "pool1:workspace" (for summaries and tests)
  size_t bytes = 0;
  int first = 0;      // first schedule step the block is alive (inclusive)
  int last = 0;       // last schedule step (inclusive)
  size_t offset = 0;  // assigned by plan_memory
};

struct MemoryPlan {
  std::vector<PlanBlock> blocks;
  size_t arena_bytes = 0;  // peak: what the arena needs
  size_t naive_bytes = 0;  // sum of all blocks: what it would need without reuse
  // The largest kernel scratch request (planned inside the arena, per op and pass: blocks
  // "<op>:scratch" and "<op>:backward scratch").
  size_t scratch_bytes = 0;
};

// Places every block at the lowest 256-byte-aligned offset that does not overlap a block alive
// at the same time (largest blocks first). Fills offset and arena_bytes.
void plan_memory(MemoryPlan& plan, size_t alignment = 256);

// True iff no two blocks alive at the same step overlap in memory (the planner's invariant).
bool plan_is_valid(const MemoryPlan& plan, std::string* why = nullptr);

}  // namespace crest
