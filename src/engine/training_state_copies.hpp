// Private to the engine: how many buffers the size of the trainable parameters a training step
// keeps beside its program (MemoryBeside::trainable_copies), known before anything is compiled.
#pragma once
#include "crest/optim/optimizer_config.hpp"

namespace crest {

// The optimizer's state (Optimizer::state_buffers: its moments, an accumulation window's sum, the
// lagged gradient) and, under the gradient lag, LaggedGradients' spare (and, with its local
// correction, this rank's previous gradient).
int training_state_copies(const OptimizerConfig& optimizer, int accumulation, bool gradient_lag,
                          bool lag_local_correction = false);

}  // namespace crest
