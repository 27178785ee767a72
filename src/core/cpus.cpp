#include "crest/core/cpus.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <thread>

namespace crest {

int online_cpus() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int usable_cpus() {
  // The kernel refuses (EINVAL) a set smaller than its own CPU mask; grow until it fits.
  for (int capacity = 1024; capacity <= (1 << 20); capacity *= 2) {
    cpu_set_t* set = CPU_ALLOC(capacity);
    if (set == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(capacity);
    CPU_ZERO_S(bytes, set);
    const int got = sched_getaffinity(0, bytes, set);
    const int error = errno;
    const int count = got == 0 ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (got == 0) return std::max(1, count);
    if (error != EINVAL) break;
  }
  return online_cpus();
}

int threads_per_rank(int local_ranks, int usable, int online) {
  const int64_t cpus = std::max(1, usable), node = std::max<int64_t>(cpus, online);
  const int64_t ranks = std::max(1, local_ranks);
  const int64_t sharing = (ranks * cpus + node - 1) / node;
  return static_cast<int>(std::max<int64_t>(1, cpus / sharing));
}

int threads_per_rank(int local_ranks) {
  return threads_per_rank(local_ranks, usable_cpus(), online_cpus());
}

}  // namespace crest
