// One worker pool for loops over independent items (files to generate, stage or validate).
#pragma once
#include <cstddef>
#include <functional>

namespace crest {

// How many threads parallel_for(n, threads, ...) runs: min(threads, n), threads < 1 counting as
// 1 (0 for n = 0). Per-worker state is indexed by `worker` below this.
int parallel_for_workers(size_t n, int threads);

// Runs body(i, worker) for every i in [0, n) on parallel_for_workers(n, threads) new threads,
// `worker` in [0, that count) naming the thread (for per-thread scratch buffers), and
// returns when every call has returned. Indices are handed out one at a time in increasing order.
// body never runs on the calling thread, so per-thread settings it makes (OpenMP's thread count)
// do not leak to the caller. Calls run concurrently: body synchronises what it shares.
//
// Errors keep the first one by index: once body(i) throws, no index above i is started (calls
// already running finish), while every index below i still runs, since it was handed out before
// i. After joining, parallel_for rethrows on the calling thread the exception of the lowest index
// that threw: the one a sequential loop would have stopped at, whatever the timing.
void parallel_for(size_t n, int threads, const std::function<void(size_t i, int worker)>& body);

// The same for a body that needs no worker number.
void parallel_for(size_t n, int threads, const std::function<void(size_t i)>& body);

}  // namespace crest
