// The DeepCAM reference's learning rate per optimizer step (mlcommons/hpc deepcam
// utils/schedulers.py and optimizer_helpers.py; reference/DEEPCAM.md "LR schedule semantics").
//
// The reference builds its scheduler already stepped once, and steps it after every optimizer
// step, so optimizer step i (0-based) uses the scheduler's value at e = i + 1 (cosine without
// warmup, a plain torch CosineAnnealingLR, starts at e = i). With W warmup steps and factor f:
//   warm(e) = base e / W (f = 1), base ((f - 1) e / W + 1) (f > 1)         for e < W
// From e = W on the schedule is chainable: it starts from the last warmup value, the plateau
//   P = warm(W - 1) (W >= 2; base for W = 1), so with f = 1 the rate never reaches base.
//   multistep:  P g^k, k = the milestones m with e >= m + W + 1 (without warmup: e >= m)
//   cosine:     eta_min + (A - eta_min)(1 + cos(pi t / T)) / 2, t = e - W, A = P for t <= T and
//               base beyond T (the chainable recursion restarts from base there, as torch's does)
// No type: constant base, the warmup settings ignored. closed_form (multistep only) is NVIDIA's
// graph-captured form (hpc_results_v3.0 NVIDIA utils/schedulers.py get_lr_gpu): warm(e) for
// e < W, then base g^k with k the milestones m < e - W: no plateau, and without warmup the decay
// comes one step later than torch's MultiStepLR.
// polynomial is the MLPerf ResNet-50 schedule (mlcommons/training image_classification
// tensorflow2 lars_util.py PolynomialDecayWithWarmup, a Keras schedule: step i is e = i, so the
// first warmup step runs at 0): warm(e) for e < W, then, with t = e - W,
//   end + (base - end) (1 - min(t, D) / D)^power
// which is base at t = 0 (the reference's last warmup value) and end from t = D on.
// Each type is an entry of the schedule registry (crest/optim/lr_schedule_registry.hpp) in its
// own file: none here, multistep_lr.cpp, cosine_annealing_lr.cpp, polynomial_lr.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace crest {

struct StepLrSchedule {
  std::string type = "none";  // a registered schedule type (none: constant start_lr)
  double start_lr = 1e-3;     // base (the reference's --start_lr)
  // multistep
  std::vector<int64_t> milestones;  // strictly increasing optimizer steps, >= 0 (>= 1 with W = 0)
  double decay_rate = 0.1;          // g, in (0, 1]
  bool closed_form = false;
  // cosine_annealing
  int64_t t_max = 1;     // T >= 1
  double eta_min = 0.0;  // >= 0
  // polynomial
  int64_t decay_steps = 1;  // D >= 1
  double end_lr = 1e-4;     // >= 0, below start_lr
  double power = 2.0;       // > 0
  // warmup (ignored without a scheduler)
  int64_t warmup_steps = 0;    // W >= 0
  double warmup_factor = 1.0;  // f >= 1

  // The rate of optimizer step `step` (0-based). Throws crest::Error (input) on invalid settings
  // or a negative step.
  double lr(int64_t step) const;
  // Throws crest::Error (input) naming the first invalid setting (lr_schedule.<key>).
  void validate() const;

  // For the registered types: warm(e), and the plateau P where a chainable schedule starts.
  double warmup_value(int64_t e) const;
  double plateau() const;
};

}  // namespace crest
