#include "crest/optim/lars.hpp"

#include <cmath>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/optim/optimizer_registry.hpp"

namespace crest {

Lars::Lars(LarsOptions options) : o_(std::move(options)) {
  check_trust_settings("lars", o_.trust_coefficient, o_.eps, o_.weight_decay);
  if (!(o_.momentum >= 0 && o_.momentum < 1))
    throw_usage("lars: momentum must be in [0, 1), got " + std::to_string(o_.momentum));
}

void Lars::on_attach() { tensors_ = AdaptedTensors(*params_, o_.exclude); }

std::string Lars::notes() const {
  return params_ ? "lars: " + tensors_.describe(*params_) : std::string();
}

// One tensor. torch form: d = ratio (g + wd w); buf = m buf + d; w = w - lr buf. Keras form:
// g += wd w (the gradient is consumed, as LAMB's is); v = m v - lr ratio g; w = w + v. An adapted
// tensor's ratio is computed where the update runs, from its norms in the parameters' memory
// (`ratio`): on a device no step waits for them. An excluded one (null) has ratio 1, no decay.
void Lars::update(size_t slot, const VectorOps::UpdateStep* at,
                  const VectorOps::TrustRatioAt* ratio) {
  const ParamSlot& s = params_->slots()[slot];
  void* buf = static_cast<char*>(state_[0].data()) + s.offset;
  void* w = params_->value(slot).data();
  void* g = params_->grad(slot).data();
  const bool torch = o_.momentum_form == LarsMomentumForm::torch;
  if (!ratio) {
    torch ? vec_->lars_update_at_step(w, g, buf, s.count, at, o_.momentum, 1.0, 0.0)
          : vec_->sgd_keras_at_step(w, g, buf, s.count, at, o_.momentum, false);
  } else if (torch) {
    vec_->lars_trust_update(w, g, buf, s.count, at, o_.momentum, *ratio);
  } else {
    vec_->sgd_keras_trust_update(w, g, buf, s.count, at, o_.momentum, *ratio);
  }
}

void Lars::queue_update() {
  const VectorOps::UpdateStep* at = update_step();
  tensors_.measure(*vec_, params_->values(), params_->grads());
  for (size_t i = 0; i < tensors_.adapted().size(); ++i) {
    const VectorOps::TrustRatioAt ratio =
        tensors_.ratio_at(i, o_.trust_coefficient, o_.weight_decay, o_.eps);
    update(tensors_.adapted()[i], at, &ratio);
  }
  for (size_t slot : tensors_.excluded()) update(slot, at, nullptr);
}

std::vector<double> Lars::last_trust_ratios() const {
  const std::vector<double> squares = tensors_.squares();
  const size_t n = tensors_.adapted().size();
  std::vector<double> ratios(n);
  for (size_t i = 0; i < n; ++i)
    ratios[i] = trust_ratio(std::sqrt(squares[i]), std::sqrt(squares[n + i]), o_.trust_coefficient,
                            o_.weight_decay, o_.eps);
  return ratios;
}

namespace {

std::unique_ptr<Optimizer> make_lars(const OptimizerConfig& o) {
  return std::make_unique<Lars>(LarsOptions{.momentum = o.momentum,
                                            .trust_coefficient = o.trust_coefficient,
                                            .eps = o.trust_eps,
                                            .weight_decay = o.weight_decay,
                                            .exclude = lars_exclusions_given(o.lars_exclude),
                                            .momentum_form = o.lars_momentum_form});
}

// No reference logs LARS: crest's settings under crest's names.
std::vector<LoggedEntry> lars_group(const OptimizerConfig& o, double lr) {
  return {{"lr", lr},
          {"momentum", o.momentum},
          {"weight_decay", o.weight_decay},
          {"trust_coefficient", o.trust_coefficient},
          {"trust_eps", o.trust_eps}};
}

OptimizerType lars_type() {
  OptimizerType t;
  t.name = "LARS";
  t.log_name = "lars";
  t.keys = {"momentum",  "weight_decay", "trust_coefficient",
            "trust_eps", "lars_exclude", "momentum_form"};
  t.default_lr = 0.01;
  t.make = make_lars;
  t.parameter_group = lars_group;
  return t;
}

}  // namespace

CREST_REGISTER_OPTIMIZER(lars, lars_type());

}  // namespace crest
