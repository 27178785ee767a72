#include "crest/core/parallel_for.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace crest {

int parallel_for_workers(size_t n, int threads) {
  return static_cast<int>(std::min(static_cast<size_t>(std::max(threads, 1)), n));
}

void parallel_for(size_t n, int threads, const std::function<void(size_t i, int worker)>& body) {
  if (n == 0) return;
  const int workers = parallel_for_workers(n, threads);
  std::atomic<size_t> next{0};
  // The lowest index that threw so far (n: none) and its exception.
  std::atomic<size_t> failed{n};
  std::mutex mu;
  std::exception_ptr error;

  auto work = [&](int worker) {
    for (;;) {
      const size_t i = next.fetch_add(1);
      // Indices only grow: past the end or past a failure, this thread has nothing left to do.
      if (i >= n || i > failed.load()) return;
      try {
        body(i, worker);
      } catch (...) {
        std::lock_guard lock(mu);
        if (i < failed.load()) {
          failed = i;
          error = std::current_exception();
        }
      }
    }
  };

  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    try {
      pool.emplace_back(work, w);
    } catch (const std::system_error&) {
      // Out of threads: the ones started do the work; with none started there is nobody to.
      if (pool.empty()) throw;
      break;
    }
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

void parallel_for(size_t n, int threads, const std::function<void(size_t i)>& body) {
  parallel_for(n, threads, [&body](size_t i, int) { body(i); });
}

}  // namespace crest
