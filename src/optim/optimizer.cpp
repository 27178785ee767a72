#include "crest/optim/optimizer.hpp"

#include "crest/core/error.hpp"

namespace crest {

void Optimizer::attach(ParamStore& params, VectorOps& vec, int accumulation) {
  if (accumulation < 1)
    throw_usage("gradient accumulation must be at least 1 micro-batch, got " +
                std::to_string(accumulation));
  params_ = &params;
  vec_ = &vec;
  count_ = params.trainable_count_padded();
  accumulation_ = accumulation;
  state_.clear();
  const size_t buffers = state_names().size() + (accumulation > 1 ? 1 : 0);
  // In the parameters' memory (the backend's), zeroed there: the padding too stays zero.
  for (size_t i = 0; i < buffers; ++i) {
    state_.emplace_back(std::max<size_t>(params.trainable_bytes(), 256), 256, params.memory());
    vec.fill(state_.back().data(), state_.back().bytes() / dtype_size(params.dtype()), 0.0);
  }
  steps_ = 0;
  on_attach();
}

std::vector<std::pair<std::string, Buffer*>> Optimizer::state() {
  std::vector<std::pair<std::string, Buffer*>> out;
  auto names = state_names();
  if (accumulation_ > 1) names.emplace_back("gradient_sum");
  for (size_t i = 0; i < state_.size(); ++i) out.push_back({names[i], &state_[i]});
  return out;
}

void* Optimizer::gradient_sum() {
  return accumulation_ > 1 && !state_.empty() ? state_.back().data() : nullptr;
}

void SgdKeras::step(double lr) {
  CREST_CHECK(params_ != nullptr, "optimizer used before attach()");
  vec_->sgd_keras(params_->values(), params_->grads(), state_[0].data(), count_, lr, momentum_);
  ++steps_;
}

void Adam::step(double lr) {
  CREST_CHECK(params_ != nullptr, "optimizer used before attach()");
  ++steps_;
  vec_->adam(params_->values(), params_->grads(), state_[0].data(), state_[1].data(), count_, lr,
             beta1_, beta2_, eps_, wd_, decoupled_, steps_);
}

}  // namespace crest
