#include "crest/optim/optimizer.hpp"

#include <cmath>

#include "crest/core/error.hpp"
#include "crest/optim/optimizer_registry.hpp"

namespace crest {

void Optimizer::attach(ParamStore& params, VectorOps& vec, int accumulation, bool gradient_lag) {
  if (accumulation < 1)
    throw_usage("gradient accumulation must be at least 1 micro-batch, got " +
                std::to_string(accumulation));
  params_ = &params;
  vec_ = &vec;
  count_ = params.trainable_count_padded();
  accumulation_ = accumulation;
  gradient_lag_ = gradient_lag;
  state_.clear();
  // In the parameters' memory (the backend's), zeroed there: the padding too stays zero.
  auto add = [&](size_t bytes) {
    state_.push_back(
        named_buffer("the optimizer's state", std::max<size_t>(bytes, 256), params.memory()));
    vec.fill(state_.back().data(), state_.back().bytes() / dtype_size(params.dtype()), 0.0);
  };
  const size_t buffers = state_names().size() + (accumulation > 1 ? 1 : 0);
  for (size_t i = 0; i < buffers; ++i) add(params.trainable_bytes());
  if (gradient_lag) add(params.trainable_bytes() + ParamStore::kSidebandBytes);
  update_step_ = StagedValues<VectorOps::UpdateStep>(params.memory());
  steps_ = 0;
  on_attach();
}

std::vector<std::pair<std::string, Buffer*>> Optimizer::state() {
  std::vector<std::pair<std::string, Buffer*>> out;
  auto names = state_names();
  if (accumulation_ > 1) names.emplace_back("gradient_sum");
  if (gradient_lag_) names.emplace_back("lagged_gradient");
  for (size_t i = 0; i < state_.size(); ++i) out.push_back({names[i], &state_[i]});
  return out;
}

void* Optimizer::gradient_sum() {
  if (accumulation_ <= 1 || state_.empty()) return nullptr;
  return state_[state_.size() - (gradient_lag_ ? 2 : 1)].data();
}

Buffer* Optimizer::lagged_gradient() {
  return gradient_lag_ && !state_.empty() ? &state_.back() : nullptr;
}

void Optimizer::step(double lr) {
  begin_step(lr);
  queue_update();
}

void Optimizer::begin_step(double lr) {
  CREST_CHECK(params_ != nullptr, "optimizer used before attach()");
  ++steps_;
  stage_update(lr);
}

void Optimizer::queue_update() {
  throw_usage("optimizer " + name() + " overrides neither step() nor queue_update()");
}

const VectorOps::UpdateStep* Optimizer::stage_update(double lr, double grad_divisor) {
  CREST_CHECK(steps_ >= 1 && grad_divisor > 0, "an update's step is 1-based, its divisor positive");
  return update_step_.set({.lr = lr, .grad_divisor = grad_divisor, .step = steps_});
}

SgdKeras::SgdKeras(double momentum, double weight_decay, LarsExclusions exclude, bool nesterov)
    : momentum_(momentum),
      weight_decay_(weight_decay),
      exclude_(std::move(exclude)),
      nesterov_(nesterov) {
  if (!(weight_decay_ >= 0) || !std::isfinite(weight_decay_))
    throw_usage("sgd: weight_decay must be a finite number >= 0, got " +
                std::to_string(weight_decay_));
  // torch refuses it too: without momentum the look-ahead is plain SGD under another name.
  if (nesterov_ && !(momentum_ > 0))
    throw_usage("sgd: nesterov needs a momentum above 0, got " + std::to_string(momentum_));
}

void SgdKeras::on_attach() {
  decayed_.clear();
  if (weight_decay_ > 0) decayed_ = AdaptedTensors(*params_, exclude_).adapted();
}

// g + wd w, in the gradient buffer the update reads next (the next backward overwrites it).
void SgdKeras::queue_update() {
  for (const size_t slot : decayed_)
    vec_->axpy(weight_decay_, params_->value(slot).data(), params_->grad(slot).data(),
               params_->slots()[slot].count);
  vec_->sgd_keras_at_step(params_->values(), params_->grads(), state_[0].data(), count_,
                          update_step(), momentum_, nesterov_);
}

void Adam::queue_update() {
  vec_->adam_at_step(params_->values(), params_->grads(), state_[0].data(), state_[1].data(),
                     count_, update_step(), beta1_, beta2_, eps_, wd_, decoupled_);
}

namespace {

std::unique_ptr<Optimizer> make_sgd(const OptimizerConfig& o) {
  if (o.nesterov && !(o.momentum > 0))
    throw_input("optimizer.nesterov: Nesterov momentum needs optimizer.momentum above 0, got " +
                std::to_string(o.momentum));
  return std::make_unique<SgdKeras>(o.momentum, o.weight_decay,
                                    weight_decay_exclusions_given(o.weight_decay_exclude),
                                    o.nesterov);
}

std::unique_ptr<Optimizer> make_adam(const OptimizerConfig& o, bool decoupled) {
  return std::make_unique<Adam>(o.beta1, o.beta2, o.eps, o.weight_decay, decoupled);
}

// torch's parameter group (later torch versions add flags crest does not have).
std::vector<LoggedEntry> adam_group(const OptimizerConfig& o, double lr) {
  return {{"lr", lr},
          {"betas", std::vector<double>{o.beta1, o.beta2}},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"amsgrad", false}};
}

// Adam and AdamW take the same keys and log the same group; the decay is what differs.
OptimizerType adam_type(const std::string& name, bool decoupled) {
  OptimizerType t;
  t.name = name;
  t.log_name = decoupled ? "adamw" : "adam";
  t.keys = {"betas", "eps", "weight_decay"};
  t.wrappable = true;
  t.keys_when_wrapped = {"betas", "eps"};
  t.default_lr = 0.001;
  if (decoupled) t.set_defaults = [](OptimizerConfig& o) { o.weight_decay = 0.01; };
  t.make = [decoupled](const OptimizerConfig& o) { return make_adam(o, decoupled); };
  t.parameter_group = adam_group;
  return t;
}

OptimizerType sgd_type() {
  OptimizerType t;
  t.name = "SGD";
  t.log_name = "sgd";
  t.keys = {"momentum", "nesterov", "weight_decay", "weight_decay_exclude"};
  t.wrappable = true;
  t.keys_when_wrapped = {"momentum", "nesterov"};
  t.default_lr = 0.01;
  t.make = make_sgd;
  t.parameter_group = [](const OptimizerConfig& o, double lr) {
    std::vector<LoggedEntry> group = {{"lr", lr}, {"momentum", o.momentum}};
    if (o.nesterov) group.push_back({"nesterov", true});
    if (o.weight_decay > 0) group.push_back({"weight_decay", o.weight_decay});
    return group;
  };
  return t;
}

}  // namespace

CREST_REGISTER_OPTIMIZER(sgd, sgd_type());
CREST_REGISTER_OPTIMIZER(adam, adam_type("Adam", false));
CREST_REGISTER_OPTIMIZER(adamw, adam_type("AdamW", true));

}  // namespace crest
