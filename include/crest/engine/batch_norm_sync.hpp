// Batch-norm statistics across ranks, as the DeepCAM reference keeps them (DEEPCAM.md, "BN"):
// synchronised batch norm over groups of consecutive ranks during training (its
// --batchnorm_group_size, PyTorch's SyncBatchNorm), and the running statistics averaged over all
// ranks before every validation (its BatchNormStatsSynchronize).
#pragma once
#include <memory>

#include "crest/backends/batch_stat_reducer.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/graph/param_store.hpp"

namespace crest {

// Sums batch-norm statistics over one group's communicator.
class GroupStatReducer : public BatchStatReducer {
 public:
  explicit GroupStatReducer(std::unique_ptr<Communicator> group) : group_(std::move(group)) {}
  void allreduce_sum(double* data, size_t n) override { group_->allreduce_sum(data, n); }
  const Communicator& group() const { return *group_; }

 private:
  std::unique_ptr<Communicator> group_;
};

// The reducer over the group of `group_size` consecutive samples' ranks this rank is in: with
// r = ranks_per_sample (dist.spatial; 1 without a split), world ranks [k*g*r, (k+1)*g*r). The
// ranks of a spatial group each hold a block of the sample (batch norm on blocks needs their
// sums together) or the same whole tensor (identical sums: the statistics do not change). Null
// when that is one rank. Collective: every rank calls it. Throws crest::Error (input) naming
// dist.batchnorm_group_size when it does not divide the data-parallel degree.
std::unique_ptr<GroupStatReducer> make_batch_norm_group(Communicator& world, int group_size,
                                                        int ranks_per_sample = 1);

// Replaces every evaluation statistic (ParamSpec::eval_stat: running mean and variance) with its
// mean over all ranks; the counters and trained parameters are left alone. Collective; a no-op on
// one rank or without such statistics.
void average_eval_stats(ParamStore& params, Communicator& world);

}  // namespace crest
