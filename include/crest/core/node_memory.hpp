// How much memory this node can still give the job: what a rank's planned program is checked
// against before it allocates (crest.max_memory_gb), so an oversized plan ends with a message
// naming the numbers instead of the kernel's OOM killer.
#pragma once
#include <cstddef>
#include <string>

namespace crest {

struct NodeMemory {
  size_t bytes = 0;    // 0: unknown (neither source could be read)
  std::string source;  // "MemAvailable" or "the cgroup limit (memory.max)"
};

// The smaller of /proc/meminfo's MemAvailable and the room left under this process's cgroup
// limit (v2 memory.max - memory.current, or v1 memory.limit_in_bytes - memory.usage_in_bytes).
NodeMemory available_node_memory();

}  // namespace crest
