#include "crest/engine/lagged_gradients.hpp"

#include <utility>

namespace crest {

namespace {

void* byte_offset(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }

}  // namespace

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
  settle();
  if (own_previous_)
    swap_correcting(have_previous, own_scale);
  else
    swap_plain(have_previous);
  std::swap(lagged_, spare_);
  // spare_ now holds the previous step's average, lagged_ this step's own gradients.
  if (sync_) {
    sync_->start_all(lagged_.data());
    in_flight_ = true;
  }
}

void LaggedGradients::swap_plain(bool have_previous) {
  const size_t count = lagged_.bytes() / dtype_size(params_.dtype());
  params_.ops().copy(params_.grads(), spare_.data(), count);
  if (have_previous) params_.ops().copy(lagged_.data(), params_.grads(), count);
}

// One pass over the trainable gradients (VectorOps::lag_correction) makes the copy to be sent and
// the corrected update; the rest of the buffer (the sideband's flags) is copied as the plain lag
// copies it. own_previous - average is taken first, so where they are equal (one rank) the update
// is this rank's own gradient bit for bit. Without a previous average (the lag's first window)
// there is no stale share to replace: the update is the own gradient, and the flags this rank
// raised in the sideband reach every rank with the next average instead.
void LaggedGradients::swap_correcting(bool have_previous, double own_scale) {
  VectorOps& ops = params_.ops();
  const size_t n = params_.trainable_count_padded();
  const size_t rest = lagged_.bytes() / dtype_size(params_.dtype()) - n;
  const size_t offset = params_.trainable_bytes();
  if (!have_previous) have_own_previous_ = false;
  ops.lag_correction(params_.grads(), lagged_.data(), own_previous_->data(), spare_.data(), n,
                     own_scale, have_own_previous_);
  ops.copy(params_.sideband(), byte_offset(spare_.data(), offset), rest);
  if (have_previous) {
    ops.copy(byte_offset(lagged_.data(), offset), params_.sideband(), rest);
  } else {
    ops.fill(lagged_.data(), n, 0.0);  // drop_correction's average: none
    ops.fill(params_.sideband(), ParamStore::kSidebandBytes / dtype_size(params_.dtype()), 0.0);
  }
  diverged_ = diverged_ || sync_ != nullptr;
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
