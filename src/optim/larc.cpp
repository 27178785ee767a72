#include "crest/optim/larc.hpp"

#include <cmath>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/optim/optimizer_registry.hpp"

namespace crest {

Larc::Larc(std::unique_ptr<Optimizer> base, LarcOptions options)
    : base_(std::move(base)), o_(std::move(options)) {
  if (!base_) throw_usage("larc: needs a base optimizer");
  check_trust_settings("larc", o_.trust_coefficient, o_.eps, o_.weight_decay);
}

// The base optimizer updates the same parameters; the micro-batch gradient sum, if any, is the
// wrapper's (the trainer asks the optimizer it holds for it).
void Larc::on_attach() {
  base_->attach(*params_, *vec_, 1);
  tensors_ = AdaptedTensors(*params_, o_.exclude);
}

std::vector<std::pair<std::string, Buffer*>> Larc::state() {
  auto out = base_->state();
  for (const auto& own : Optimizer::state()) out.push_back(own);
  return out;
}

void Larc::set_steps_taken(int64_t steps) {
  Optimizer::set_steps_taken(steps);
  base_->set_steps_taken(steps);
}

std::string Larc::notes() const {
  return params_ ? name() + ": " + tensors_.describe(*params_) : std::string();
}

void Larc::begin_step(double lr) {
  Optimizer::begin_step(lr);
  last_lr_ = lr;
  if (base_->replays_update()) base_->begin_step(lr);
}

// g = a (g + wd w) for every adapted tensor, with apex's two in-place passes; a (the trust ratio,
// clipped to lr in clip mode) is computed where the rescaling runs, from the tensor's norms in
// the parameters' memory: on a device no step waits for them.
void Larc::queue_update() {
  const VectorOps::UpdateStep* at = update_step();
  tensors_.measure(*vec_, params_->values(), params_->grads());
  const bool clip = o_.mode == LarcMode::clip;
  for (size_t i = 0; i < tensors_.adapted().size(); ++i) {
    const size_t slot = tensors_.adapted()[i];
    vec_->larc_trust_rescale(
        params_->grad(slot).data(), params_->value(slot).data(), params_->slots()[slot].count,
        tensors_.ratio_at(i, o_.trust_coefficient, o_.weight_decay, o_.eps), clip, at);
  }
  if (base_->replays_update())
    base_->queue_update();
  else
    base_->step(last_lr_);
}

std::vector<double> Larc::last_factors() const {
  const std::vector<double> squares = tensors_.squares();
  const size_t n = tensors_.adapted().size();
  std::vector<double> factors(n, 1.0);  // 1 where a norm was 0 (apex: no rescaling)
  for (size_t i = 0; i < n; ++i) {
    if (squares[i] == 0 || squares[n + i] == 0) continue;
    factors[i] = larc_factor(trust_ratio(std::sqrt(squares[i]), std::sqrt(squares[n + i]),
                                         o_.trust_coefficient, o_.weight_decay, o_.eps),
                             o_.mode == LarcMode::clip, last_lr_);
  }
  return factors;
}

namespace {

// The base's settings: the name optimizer.larc_base gives.
OptimizerConfig base_config(const OptimizerConfig& o) {
  OptimizerConfig base = o;
  base.name = o.larc_base;
  return base;
}

// The base is built with weight decay 0: LARC applies the decay itself, as apex does.
std::unique_ptr<Optimizer> make_larc(const OptimizerConfig& o) {
  if (!find_optimizer_type(o.larc_base).wrappable)
    throw_input("optimizer.larc_base: " + o.larc_base + " cannot be wrapped by LARC");
  OptimizerConfig base = base_config(o);
  base.weight_decay = 0;
  return std::make_unique<Larc>(make_optimizer(base),
                                LarcOptions{.mode = o.larc_mode,
                                            .trust_coefficient = o.trust_coefficient,
                                            .eps = o.trust_eps,
                                            .weight_decay = o.weight_decay,
                                            .exclude = lars_exclusions_given(o.lars_exclude)});
}

// LARC's own keys, then its base's group with the weight decay LARC applies.
std::vector<LoggedEntry> larc_group(const OptimizerConfig& o, double lr) {
  std::vector<LoggedEntry> group = {{"larc_base", o.larc_base},
                                    {"larc_mode", std::string(enum_name(o.larc_mode))},
                                    {"trust_coefficient", o.trust_coefficient},
                                    {"trust_eps", o.trust_eps}};
  for (auto& entry : optimizer_parameter_group(base_config(o), lr)) group.push_back(entry);
  return group;
}

// The default learning rate is the base's (LARC over SGD: 0.01); trust coefficient 0.02, apex's.
OptimizerType larc_type() {
  OptimizerType t;
  t.name = "LARC";
  t.log_name = "larc";
  t.keys = {"weight_decay", "trust_coefficient", "trust_eps",
            "lars_exclude", "larc_mode",         "larc_base"};
  t.wraps = true;
  t.set_defaults = [](OptimizerConfig& o) { o.trust_coefficient = 0.02; };
  t.make = make_larc;
  t.parameter_group = larc_group;
  return t;
}

}  // namespace

CREST_REGISTER_OPTIMIZER(larc, larc_type());

}  // namespace crest
