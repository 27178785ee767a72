#include "crest/optim/lamb.hpp"

#include <cmath>

#include "crest/core/error.hpp"
#include "crest/graph/param_shard.hpp"
#include "crest/optim/optimizer_registry.hpp"

namespace crest {

Lamb::Lamb(const LambOptions& options) : o_(options) {
  auto in_unit = [](double b) { return b >= 0 && b < 1; };
  if (!in_unit(o_.beta1) || !in_unit(o_.beta2))
    throw_usage("lamb: betas must be in [0, 1), got " + std::to_string(o_.beta1) + ", " +
                std::to_string(o_.beta2));
  if (!(o_.eps > 0)) throw_usage("lamb: eps must be positive, got " + std::to_string(o_.eps));
  if (!(o_.weight_decay >= 0))
    throw_usage("lamb: weight_decay must not be negative, got " + std::to_string(o_.weight_decay));
  if (!(o_.max_grad_norm > 0))
    throw_usage("lamb: max_grad_norm must be positive, got " + std::to_string(o_.max_grad_norm));
}

// Summed slot by slot, in slot order: the norm covers exactly the trainable gradients (never
// the alignment padding) and is the same on every rank, which hold the same gradients. A step
// that was offered the sum (TrainStep measures it over the padded range, whose padding is zero)
// skips this pass over 4 bytes per parameter.
double Lamb::global_gradient_norm() const {
  double squares = 0;
  std::vector<double> parts;  // divided parameters' parts, summed over their groups
  for (size_t s = 0; s < params_->slots().size(); ++s) {
    const ParamSlot& slot = params_->slots()[s];
    if (!slot.spec.trainable) continue;
    const double sum = vec_->sum_squares(params_->grad(s).data(), slot.count);
    if (slot.spec.shard)
      parts.push_back(sum);
    else
      squares += sum;
  }
  return std::sqrt(squares + params_->sum_over_groups(parts));
}

// Without weight decay apex takes no trust ratio (use_nvlamb off): the step is plain lr u for
// every tensor, one pass over the whole trainable range (its zero padding gives u = 0).
void Lamb::step_without_trust_ratios(const VectorOps::UpdateStep* at) {
  vec_->lamb_direction_at_step(params_->values(), params_->grads(), state_[0].data(),
                               state_[1].data(), count_, at, o_.beta1, o_.beta2, o_.eps,
                               o_.weight_decay);
  vec_->lamb_trust_update(params_->values(), params_->grads(), count_, at, nullptr);
}

// Tensor by tensor: u (in the gradient buffer) with the norms of w and u, then w <- w - lr r u
// while the tensor is still in cache. Each tensor's results do not depend on the order. The
// norms stay in the backend's memory, where the update reads them: on a device the step waits
// for none of its tensors. A divided tensor's norms are its whole tensor's, the parts' sums
// over the group: those come back to the host, and their update takes lr and divisor from it.
void Lamb::step_with_trust_ratios(const VectorOps::UpdateStep* at, double lr, double divisor) {
  auto* sums = static_cast<double*>(tensor_sums_.data());
  for (size_t s = 0; s < params_->slots().size(); ++s) {
    const ParamSlot& slot = params_->slots()[s];
    if (!slot.spec.trainable) continue;
    void* w = params_->value(s).data();
    void* u = params_->grad(s).data();
    void* m = static_cast<char*>(state_[0].data()) + slot.offset;
    void* v = static_cast<char*>(state_[1].data()) + slot.offset;
    if (!slot.spec.shard) {
      vec_->lamb_direction_with_norms_into(w, u, m, v, slot.count, at, o_.beta1, o_.beta2, o_.eps,
                                           o_.weight_decay, sums + 2 * s);
      vec_->lamb_trust_update(w, u, slot.count, at, sums + 2 * s);
      continue;
    }
    const VectorOps::SquareSums part = vec_->lamb_direction_with_norms(
        w, u, m, v, slot.count, divisor, o_.beta1, o_.beta2, o_.eps, o_.weight_decay, steps_);
    double both[2] = {part.w, part.u};
    slot.spec.shard->sum_over_group(both, 2);
    vec_->axpy(-lr * lamb_trust_ratio(both[0], both[1]), u, w, slot.count);
  }
}

void Lamb::on_attach() {
  if (o_.weight_decay > 0)
    tensor_sums_ = Buffer(2 * params_->slots().size() * sizeof(double), 256, params_->memory());
  divided_ = false;  // without weight decay every tensor takes the same plain step
  if (o_.weight_decay > 0)
    for (const ParamSlot& slot : params_->slots())
      divided_ = divided_ || (slot.spec.trainable && slot.spec.shard != nullptr);
}

void Lamb::begin_step(double lr) {
  CREST_CHECK(params_ != nullptr, "optimizer used before attach()");
  ++steps_;
  const std::optional<double> offered = take_offered_sum_squares();
  last_norm_ = offered ? std::sqrt(*offered) : global_gradient_norm();
  step_lr_ = lr;
  step_divisor_ = last_norm_ > o_.max_grad_norm ? last_norm_ / o_.max_grad_norm : 1.0;
  stage_update(lr, step_divisor_);
}

void Lamb::queue_update() {
  if (o_.weight_decay == 0)
    step_without_trust_ratios(update_step());
  else
    step_with_trust_ratios(update_step(), step_lr_, step_divisor_);
}

namespace {

// apex FusedLAMB's parameter group, in its order.
std::vector<LoggedEntry> lamb_group(const OptimizerConfig& o, double lr) {
  return {{"lr", lr},
          {"bias_correction", true},
          {"betas", std::vector<double>{o.beta1, o.beta2}},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"grad_averaging", true},
          {"max_grad_norm", o.max_grad_norm}};
}

// eps and weight decay 1e-6: the DeepCAM reference's FusedLAMB arguments.
OptimizerType lamb_type() {
  OptimizerType t;
  t.name = "LAMB";
  t.log_name = "lamb";
  t.keys = {"betas", "eps", "weight_decay", "max_grad_norm"};
  t.default_lr = 0.001;
  t.set_defaults = [](OptimizerConfig& o) {
    o.eps = 1e-6;
    o.weight_decay = 1e-6;
  };
  t.make = [](const OptimizerConfig& o) {
    return std::make_unique<Lamb>(LambOptions{.beta1 = o.beta1,
                                              .beta2 = o.beta2,
                                              .eps = o.eps,
                                              .weight_decay = o.weight_decay,
                                              .max_grad_norm = o.max_grad_norm});
  };
  t.parameter_group = lamb_group;
  return t;
}

}  // namespace

CREST_REGISTER_OPTIMIZER(lamb, lamb_type());

}  // namespace crest
