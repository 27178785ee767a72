// The hook that makes batch normalisation synchronised (PyTorch's SyncBatchNorm): a batch-norm
// kernel hands its per-channel sums to a reducer, which sums them over a group of ranks before
// the kernel uses them, so every rank of the group normalises with the statistics of the group's
// whole batch. A null reducer (the default) is ordinary, local batch norm.
//
// The trainer owns the reducer (typically over a communicator of `batchnorm_group_size`
// consecutive ranks) and sets it with Executor::set_batch_stat_reducer; the executor puts it in
// every layer's RunContext. Every rank of a group runs the same graph, so the calls come in the
// same order with the same sizes everywhere: two per batch-norm layer in a training forward (the
// element count with the sums of x, then the sums of squared deviations from the group's mean),
// one in its backward (the sums of dy and of dy * x_hat). Evaluation forwards make none.
#pragma once
#include <cstddef>

namespace crest {

class BatchStatReducer {
 public:
  virtual ~BatchStatReducer() = default;
  // Replaces data[0..n) with its element-wise sum over the group (this rank's values included).
  // `data` is host memory, as the communicators read it.
  virtual void allreduce_sum(double* data, size_t n) = 0;
};

}  // namespace crest
