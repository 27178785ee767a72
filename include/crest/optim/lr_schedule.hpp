// The reference CosmoFlow learning-rate schedule (SPEC.md §1, "Optimizer and schedule"):
// linear warmup from base_lr to a batch-scaled peak, then step decays. The rate is set once per
// epoch; the optimizer reads it at the start of each epoch.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace crest {

struct LrSchedule {
  // How the peak rate grows with the global batch: scale = global_batch / base_batch_size
  // (linear), its square root (sqrt), or 1 (none).
  enum Scaling { linear, sqrt, none };

  // Defaults are the MLPerf reference values (cosmo.yaml, section lr_schedule).
  double base_lr = 0.001;
  Scaling scaling = linear;
  int64_t base_batch_size = 64;
  int n_warmup_epochs = 4;
  std::map<int, double> decay_schedule = {{32, 0.25}, {64, 0.125}};  // epoch E -> factor

  // peak = base_lr * scale. For e < n_warmup_epochs: base_lr + e * (peak - base_lr) / n_warmup;
  // otherwise peak * d, d the factor of the largest E in decay_schedule with E < e (1 if none).
  // epoch is 0-based. Throws crest::Error (input) on invalid settings or arguments.
  double lr(int epoch, int64_t global_batch) const;

  // The batch scale factor alone (1 for none).
  double scale(int64_t global_batch) const;

  // Throws crest::Error (input) naming the first invalid setting: base_lr must be finite and > 0,
  // base_batch_size > 0, n_warmup_epochs >= 0, decay epochs >= 0, factors finite and > 0.
  void validate() const;

  // "linear", "sqrt", "none" (the cosmo.yaml spellings); throws crest::Error (input) otherwise.
  static Scaling parse_scaling(const std::string& name);
  static const char* scaling_name(Scaling s);
};

}  // namespace crest
