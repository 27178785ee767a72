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

void LaggedGradients::correct_locally() {
  own_previous_.emplace(params_.trainable_bytes(), 256, params_.memory());
  params_.ops().fill(own_previous_->data(), params_.trainable_count_padded(), 0.0);
}

void LaggedGradients::swap(bool have_previous, double own_scale) {
  const size_t count = lagged_.bytes() / dtype_size(params_.dtype());
  settle();
  params_.ops().copy(params_.grads(), spare_.data(), count);
  if (have_previous) params_.ops().copy(lagged_.data(), params_.grads(), count);
  std::swap(lagged_, spare_);
  // spare_ now holds the previous step's average, lagged_ this step's own gradients.
  if (own_previous_) apply_correction(have_previous, own_scale);
  if (sync_) {
    sync_->start_all(lagged_.data());
    in_flight_ = true;
  }
}

// own_previous - average is taken first, so where they are equal (one rank) the update is this
// rank's own gradient bit for bit. Without a previous average (the lag's first window) there is
// no stale share to replace: the update is the own gradient, and the flags this rank raised in
// the sideband reach every rank with the next average instead.
void LaggedGradients::apply_correction(bool have_previous, double own_scale) {
  VectorOps& ops = params_.ops();
  const size_t n = params_.trainable_count_padded();
  void* grads = params_.grads();
  if (!have_previous) {
    have_own_previous_ = false;
    ops.fill(spare_.data(), n, 0.0);  // drop_correction's average: none
    ops.fill(params_.sideband(), ParamStore::kSidebandBytes / dtype_size(params_.dtype()), 0.0);
  }
  if (have_own_previous_) ops.axpy(-1.0, spare_.data(), own_previous_->data(), n);
  ops.scale(own_scale, lagged_.data(), grads, n);
  if (have_own_previous_) ops.axpy(-1.0, own_previous_->data(), grads, n);
  diverged_ = diverged_ || sync_ != nullptr;
  ops.scale(own_scale, lagged_.data(), own_previous_->data(), n);
  have_own_previous_ = true;
}

void LaggedGradients::drop_correction() {
  params_.ops().copy(spare_.data(), params_.grads(), params_.trainable_count_padded());
}

void LaggedGradients::restart_correction() {
  have_own_previous_ = false;
  diverged_ = false;
}

void LaggedGradients::settle() {
  if (!in_flight_) return;
  sync_->finish();
  in_flight_ = false;
}

}  // namespace crest
