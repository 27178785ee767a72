#include "crest/optim/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "crest/core/error.hpp"

namespace crest {

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options) {
  const LossScalerOptions& o = options_;
  if (!(o.initial_scale >= kMinScale && o.initial_scale <= kMaxScale))
    throw_usage("loss scaler: the initial scale must be in [1, 2^24], got " +
                std::to_string(o.initial_scale));
  if (o.growth_interval < 1)
    throw_usage("loss scaler: the growth interval must be at least 1 step, got " +
                std::to_string(o.growth_interval));
  if (!(o.growth_factor > 1 && std::isfinite(o.growth_factor)))
    throw_usage("loss scaler: the growth factor must be above 1, got " +
                std::to_string(o.growth_factor));
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
    throw_usage("loss scaler: the backoff factor must be in (0, 1), got " +
                std::to_string(o.backoff_factor));
  reset();
}

// torch's _amp_update_scale_: a clean step counts; the growth_interval-th in a row grows S and
// starts the count again; an overflow backs S off and starts the count again.
void LossScaler::update(bool overflow) {
  if (overflow) {
    CREST_CHECK(can_back_off(), "loss scaler: an overflow at the smallest scale");
    state_.scale = std::max(state_.scale * options_.backoff_factor, kMinScale);
    state_.clean_steps = 0;
    return;
  }
  if (++state_.clean_steps < options_.growth_interval) return;
  state_.scale = std::min(state_.scale * options_.growth_factor, kMaxScale);
  state_.clean_steps = 0;
}

bool LossScaler::skips_overflow(bool losses_finite, bool gradients_finite) {
  if (!losses_finite) return false;
  if (!gradients_finite) {
    if (!can_back_off()) return false;
    update(/*overflow=*/true);
    return true;
  }
  update(/*overflow=*/false);
  return false;
}

std::string loss_scale_text(double scale) {
  char buf[32];
  std::snprintf(buf, sizeof buf, scale == std::floor(scale) && scale < 1e15 ? "%.0f" : "%.6g",
                scale);
  return buf;
}

}  // namespace crest
