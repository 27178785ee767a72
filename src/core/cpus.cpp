#include "crest/core/cpus.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "crest/core/error.hpp"

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

int parse_omp_num_threads(const char* value) {
  if (value == nullptr) return 0;
  const std::string text(value);
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return 0;
  const size_t end = text.find(',', begin);
  std::string first = text.substr(begin, end == std::string::npos ? end : end - begin);
  first.erase(first.find_last_not_of(" \t") + 1);
  const bool digits = !first.empty() && first.size() <= 9 &&
                      first.find_first_not_of("0123456789") == std::string::npos;
  const int threads = digits ? std::atoi(first.c_str()) : 0;
  if (threads < 1)
    throw_usage("OMP_NUM_THREADS='" + text +
                "': its first entry must be a positive thread count (unset it, or give "
                "crest.threads or --threads a count)");
  return threads;
}

int default_threads_per_rank(int local_ranks) {
  if (const int asked = parse_omp_num_threads(std::getenv("OMP_NUM_THREADS")); asked > 0)
    return asked;
  return threads_per_rank(local_ranks);
}

}  // namespace crest
