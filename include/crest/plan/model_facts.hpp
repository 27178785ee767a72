// What the scaling model (crest plan, docs/scaling.md) knows of a network: every op's FLOPs,
// activation sizes, trained parameters and sliding windows per sample, and the memory a rank
// needs for them, taken from the compiled program itself (a plan-only compile: nothing is
// allocated for activations), so the plan and the training run count the same things.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "crest/graph/executor.hpp"
#include "crest/train/config.hpp"

namespace crest {

struct LayerFacts {
  std::string name, kind;
  Shape in, out;                                 // per sample: [c, spatial...] or [features]
  double forward_flops = 0, backward_flops = 0;  // per sample
  size_t trainable_bytes = 0;
  std::vector<WindowAxis> windows;  // sliding-window layers: per spatial axis (batch 1)
  bool dense_on_features = false;   // reads a flattened feature map (CosmoFlow's fc1)
  bool batch_norm = false;          // its statistics are summed over a split sample's group
};

struct ModelFacts {
  std::string model;                 // the model's name (model.name)
  std::string backend;               // the backend it was compiled on
  std::string precision;             // crest.precision
  Shape sample;                      // one sample as the model reads it, channels last
  size_t sample_bytes = 0;           // one sample's float32 bytes (what a reader reads per sample)
  std::vector<LayerFacts> layers;    // program order: backward runs them in reverse
  size_t parameter_bytes = 0;        // every parameter (trained, and non-trained state)
  size_t trainable_bytes = 0;        // what the gradient exchange sums every step
  size_t optimizer_state_bytes = 0;  // the optimizer's own (and accumulation's), not the lag's
  // What train.gradient_lag: 1 adds: the lagged gradient (optimizer state) and the step's spare
  // copy, each the gradient buffer with its sideband. Planned for every config, so a `+ lag`
  // candidate is priced alike whether the config has the lag or not.
  size_t gradient_lag_bytes = 0;
  // Why train.gradient_lag: 1 would not train with the config's optimizer at its tuned rate
  // (lag_caution), or "": a `+ lag` candidate carries it and is never recommended.
  std::string lag_caution;
  // The same for the lag with its local correction (train.gradient_lag.correction: local), whose
  // candidates carry this one instead: "" where the correction trained what the plain lag did not.
  std::string corrected_lag_caution;
  // The activation arena (activations and kernel scratch) at batch 1 and 2: the planner takes
  // it as linear in the batch between and beyond these.
  size_t arena_batch1 = 0, arena_batch2 = 0;
  double forward_flops() const;   // per sample
  double backward_flops() const;  // per sample
  size_t arena_bytes(double batch) const;
};

// Momentum SGD (SGD, LARS, LARC over SGD, momentum m > 0) with a one-step-old gradient is
// stable only for steps lr·h < 1 − m on a direction of curvature h, against 2 (1 + m)
// synchronously (38 times smaller at m = 0.9; Nesterov's look-ahead widens it several-fold,
// still far below): a rate tuned for synchronous training stalls or diverges
// (docs/convergence.md). Adam's first moment is a momentum too: under Adam (AdamW, LARC over
// either) CosmoFlow's fixture missed with the lag, in 20 epochs, the target synchronous
// training reached in 7. LAMB's is too: it trained DeepCAM with the lag as fast as without
// (eight seeds) but CosmoFlow not in 20 epochs (synchronously 9-11). The note for `optimizer`,
// or "".
std::string lag_caution(const OptimizerConfig& optimizer);
// With the local correction the ranks' mean takes the synchronous update under an update linear
// in the gradient: CosmoFlow's fixture trained within 7 % of synchronous training's epochs under
// momentum SGD and as fast under Adam, but under LAMB (whose per-element scaling, norm clipping
// and trust ratios act rank by rank) worse than with the plain lag; LARS and LARC, with trust
// ratios too, are unmeasured. The note (LAMB, LARS, LARC), or "".
std::string corrected_lag_caution(const OptimizerConfig& optimizer);

// Compiles the config's model for training on one process, plan only (collective over nothing),
// with its optimizer, and collects the facts. Errors are the config's and the compiler's.
ModelFacts model_facts(const Config& config);

}  // namespace crest
