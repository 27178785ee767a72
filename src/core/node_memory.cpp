#include "crest/core/node_memory.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace crest {
namespace {

// The first number in `path` (a cgroup file); 0 when unreadable or "max" (no limit).
size_t number_in(const std::string& path) {
  std::ifstream in(path);
  size_t v = 0;
  return in >> v ? v : 0;
}

size_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      size_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  return 0;
}

// Room left under the cgroup's limit; 0 when there is none or it cannot be read.
size_t cgroup_room() {
  for (const auto& [limit, usage] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                  "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const size_t l = number_in(limit), u = number_in(usage);
    // v1 reports "no limit" as a huge number: anything beyond 2^60 bytes is none.
    if (l > 0 && l < (size_t{1} << 60)) return l > u ? l - u : 1;
  }
  return 0;
}

}  // namespace

NodeMemory available_node_memory() {
  NodeMemory m{mem_available(), "MemAvailable"};
  const size_t room = cgroup_room();
  if (room > 0 && (m.bytes == 0 || room < m.bytes)) m = {room, "the room under the cgroup limit"};
  return m;
}

}  // namespace crest
