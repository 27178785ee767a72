#include "training_state_copies.hpp"

#include "crest/optim/optimizer_registry.hpp"

namespace crest {

int training_state_copies(const OptimizerConfig& optimizer, int accumulation, bool gradient_lag,
                          bool lag_local_correction) {
  return make_optimizer(optimizer)->state_buffers(accumulation, gradient_lag) +
         (gradient_lag ? 1 : 0) + (gradient_lag && lag_local_correction ? 1 : 0);
}

}  // namespace crest
