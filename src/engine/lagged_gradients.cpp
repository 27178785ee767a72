#include "crest/engine/lagged_gradients.hpp"

#include <utility>

namespace crest {

LaggedGradients::LaggedGradients(const ParamStore& params, Buffer& lagged, GradientSync* sync)
    : params_(params),
      lagged_(lagged),
      sync_(sync && sync->ranks() > 1 ? sync : nullptr),
      spare_(lagged.bytes(), 256, params.memory()) {
  params.ops().fill(spare_.data(), spare_.bytes() / dtype_size(params.dtype()), 0.0);
}

void LaggedGradients::swap(bool have_previous) {
  const size_t count = lagged_.bytes() / dtype_size(params_.dtype());
  settle();
  params_.ops().copy(params_.grads(), spare_.data(), count);
  if (have_previous) params_.ops().copy(lagged_.data(), params_.grads(), count);
  std::swap(lagged_, spare_);
  if (sync_) {
    sync_->start_all(lagged_.data());
    in_flight_ = true;
  }
}

void LaggedGradients::settle() {
  if (!in_flight_) return;
  sync_->finish();
  in_flight_ = false;
}

}  // namespace crest
