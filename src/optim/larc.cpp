#include "crest/optim/larc.hpp"

#include <algorithm>
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
  factors_.assign(tensors_.adapted().size(), 1.0);
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

// g = a (g + wd w) for adapted()[i], with apex's two in-place passes.
void Larc::rescale(size_t i, double lr) {
  const double w_norm = tensors_.weight_norm(i), g_norm = tensors_.grad_norm(i);
  factors_[i] = 1.0;
  if (w_norm == 0 || g_norm == 0) return;  // apex: no rescaling, no weight decay
  double a = trust_ratio(w_norm, g_norm, o_.trust_coefficient, o_.weight_decay, o_.eps);
  // lr 0 clips to 1 (a / 0 is infinite): the step is 0 anyway.
  if (o_.mode == LarcMode::clip) a = std::min(a / lr, 1.0);
  factors_[i] = a;
  const size_t slot = tensors_.adapted()[i];
  const size_t count = params_->slots()[slot].count;
  void* g = params_->grad(slot).data();
  if (o_.weight_decay != 0) vec_->axpy(o_.weight_decay, params_->value(slot).data(), g, count);
  vec_->scale(a, g, g, count);
}

void Larc::step(double lr) {
  CREST_CHECK(params_ != nullptr, "optimizer used before attach()");
  ++steps_;
  tensors_.measure(*vec_, params_->values(), params_->grads());
  for (size_t i = 0; i < tensors_.adapted().size(); ++i) rescale(i, lr);
  base_->step(lr);
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
