#include "crest/engine/batch_norm_sync.hpp"

#include <vector>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"

namespace crest {

std::unique_ptr<GroupStatReducer> make_batch_norm_group(Communicator& world, int group_size,
                                                        int ranks_per_sample) {
  const int shards = world.size() / ranks_per_sample;
  if (group_size < 1 || shards % group_size != 0)
    throw_input("dist.batchnorm_group_size: " + std::to_string(group_size) +
                " does not divide the " + std::to_string(shards) +
                (ranks_per_sample > 1 ? " data-parallel groups" : " ranks") +
                " into groups of consecutive ones");
  // A spatial group shares its sample's statistics (batch norm on blocks sums them over the
  // group; one that runs whole on every rank sums identical copies, which changes nothing).
  const int ranks = group_size * ranks_per_sample;
  if (ranks == 1) return nullptr;
  // Every rank takes part in the split, as MPI_Comm_split requires.
  auto group = world.split(world.rank() / ranks, world.rank());
  return std::make_unique<GroupStatReducer>(std::move(group));
}

void average_eval_stats(ParamStore& params, Communicator& world) {
  if (world.size() == 1) return;
  std::vector<const ParamSlot*> stats;
  size_t count = 0;
  for (const ParamSlot& s : params.slots())
    if (s.spec.eval_stat) {
      stats.push_back(&s);
      count += s.count;
    }
  if (stats.empty()) return;
  // One allreduce for all of them, in double whatever the store's dtype.
  HostStaging host(params.memory(), params.values(), params.bytes());
  std::vector<double> sums;
  sums.reserve(count);
  const bool f32 = params.dtype() == DType::f32;
  for (const ParamSlot* s : stats) {
    const char* at = host.as<char>() + s->offset;
    for (size_t i = 0; i < s->count; ++i)
      sums.push_back(f32 ? reinterpret_cast<const float*>(at)[i]
                         : reinterpret_cast<const double*>(at)[i]);
  }
  world.allreduce_sum(sums.data(), sums.size());
  const double n = static_cast<double>(world.size());
  size_t k = 0;
  for (const ParamSlot* s : stats) {
    char* at = host.as<char>() + s->offset;
    for (size_t i = 0; i < s->count; ++i, ++k) {
      if (f32)
        reinterpret_cast<float*>(at)[i] = static_cast<float>(sums[k] / n);
      else
        reinterpret_cast<double*>(at)[i] = sums[k] / n;
    }
  }
  host.commit();
}

}  // namespace crest
