// Collectives that run on a device backend's own memory, ordered with its kernels (NCCL on the
// cuda backend, Backend::device_collectives): where the parameters live on a device, the gradient
// buckets are reduced in place instead of through host copies for MPI (GradientSync). MPI stays
// the launcher: it bootstraps them (the unique id goes through the job's communicator).
#pragma once
#include <cstddef>
#include <string>

#include "crest/core/dtype.hpp"

namespace crest {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual std::string name() const = 0;  // "nccl"
  // Queues values[0, n) (f32, f64, bf16 or f16, in the backend's memory) <- their sum over the
  // group, times `scale`, behind the work queued on the backend's stream so far; returns at once.
  // Work queued on the stream later does not wait for it, until wait().
  virtual void allreduce_sum(void* values, size_t n, DType dtype, double scale) = 0;
  // Makes the backend's stream wait for every collective queued so far and blocks until they are
  // complete. Throws crest::Error (runtime) with the library's message, or, when they have not
  // completed within `timeout_s`, aborts the collectives and throws naming `what` (a rank
  // stopped responding: the watchdog's rule for MPI collectives).
  virtual void wait(double timeout_s, const std::string& what) = 0;
  // Makes the backend's stream wait for every collective queued so far, without blocking the
  // host: a step recorded as a graph (crest.cuda_graphs) orders its update behind its exchange
  // this way, and waits after the launch (wait_stream).
  virtual void join() = 0;
  // Blocks until the work queued on the backend's stream so far is complete — a launched
  // recording, whose collectives are inside it — at most `timeout_s`, with wait()'s rules for a
  // deadline passed or an error the library reports.
  virtual void wait_stream(double timeout_s, const std::string& what) = 0;
};

}  // namespace crest
