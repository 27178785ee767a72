#include "crest/optim/lr_schedule.hpp"

#include <cmath>
#include <iterator>

#include "crest/core/error.hpp"

namespace crest {

void LrSchedule::validate() const {
  if (!std::isfinite(base_lr) || base_lr <= 0.0)
    throw_input("lr_schedule.base_lr must be a finite positive number, got " +
                std::to_string(base_lr));
  if (base_batch_size <= 0)
    throw_input("lr_schedule.base_batch_size must be positive, got " +
                std::to_string(base_batch_size));
  if (n_warmup_epochs < 0)
    throw_input("lr_schedule.n_warmup_epochs must be >= 0, got " + std::to_string(n_warmup_epochs));
  for (const auto& [epoch, factor] : decay_schedule) {
    if (epoch < 0)
      throw_input("lr_schedule.decay_schedule epoch must be >= 0, got " + std::to_string(epoch));
    if (!std::isfinite(factor) || factor <= 0.0)
      throw_input("lr_schedule.decay_schedule[" + std::to_string(epoch) +
                  "] must be a finite positive factor, got " + std::to_string(factor));
  }
  if (scaling != linear && scaling != sqrt && scaling != none)
    throw_input("lr_schedule.scaling has an invalid value");
}

double LrSchedule::scale(int64_t global_batch) const {
  if (global_batch <= 0)
    throw_input("global batch size must be positive, got " + std::to_string(global_batch));
  if (base_batch_size <= 0)
    throw_input("lr_schedule.base_batch_size must be positive, got " +
                std::to_string(base_batch_size));
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(base_batch_size);
  switch (scaling) {
    case linear:
      return ratio;
    case sqrt:
      return std::sqrt(ratio);
    case none:
      return 1.0;
  }
  throw_input("lr_schedule.scaling has an invalid value");
}

double LrSchedule::lr(int epoch, int64_t global_batch) const {
  validate();
  if (epoch < 0) throw_input("epoch must be >= 0, got " + std::to_string(epoch));
  const double peak = base_lr * scale(global_batch);
  if (epoch < n_warmup_epochs)
    return base_lr +
           static_cast<double>(epoch) * (peak - base_lr) / static_cast<double>(n_warmup_epochs);
  // Largest decay epoch E with E < epoch: the entry just before lower_bound(epoch).
  double d = 1.0;
  auto it = decay_schedule.lower_bound(epoch);
  if (it != decay_schedule.begin()) d = std::prev(it)->second;
  return peak * d;
}

LrSchedule::Scaling LrSchedule::parse_scaling(const std::string& name) {
  if (name == "linear") return linear;
  if (name == "sqrt") return sqrt;
  if (name == "none") return none;
  throw_input("lr_schedule.scaling must be one of linear, sqrt, none; got '" + name + "'");
}

const char* LrSchedule::scaling_name(Scaling s) {
  switch (s) {
    case linear:
      return "linear";
    case sqrt:
      return "sqrt";
    case none:
      return "none";
  }
  return "?";
}

}  // namespace crest
