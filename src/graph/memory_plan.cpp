#include "crest/graph/memory_plan.hpp"

#include <algorithm>
#include <numeric>

#include "crest/core/tensor.hpp"

namespace crest {
namespace {

bool alive_together(const PlanBlock& a, const PlanBlock& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

void plan_memory(MemoryPlan& plan, size_t alignment) {
  std::vector<size_t> order(plan.blocks.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first: big tensors get the low offsets and small ones fill the gaps between them.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return plan.blocks[a].bytes > plan.blocks[b].bytes; });
  std::vector<size_t> placed;
  plan.arena_bytes = 0;
  plan.naive_bytes = 0;
  for (size_t idx : order) {
    PlanBlock& blk = plan.blocks[idx];
    const size_t size = align_up(std::max<size_t>(blk.bytes, 1), alignment);
    plan.naive_bytes += size;
    // Intervals already taken by blocks alive at the same time, sorted by offset.
    std::vector<std::pair<size_t, size_t>> taken;
    for (size_t p : placed)
      if (alive_together(plan.blocks[p], blk))
        taken.push_back({plan.blocks[p].offset,
                         plan.blocks[p].offset +
                             align_up(std::max<size_t>(plan.blocks[p].bytes, 1), alignment)});
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + size <= lo) break;  // fits in the gap before this block
      offset = std::max(offset, hi);
    }
    blk.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(idx);
  }
}

bool plan_is_valid(const MemoryPlan& plan, std::string* why) {
  for (size_t i = 0; i < plan.blocks.size(); ++i) {
    const PlanBlock& a = plan.blocks[i];
    if (a.offset + a.bytes > plan.arena_bytes) {
      if (why) *why = a.what + " ends past the arena";
      return false;
    }
    for (size_t j = i + 1; j < plan.blocks.size(); ++j) {
      const PlanBlock& b = plan.blocks[j];
      if (!alive_together(a, b) || a.bytes == 0 || b.bytes == 0) continue;
      if (a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes) {
        if (why) *why = a.what + " overlaps " + b.what + " while both are alive";
        return false;
      }
    }
  }
  return true;
}

}  // namespace crest
