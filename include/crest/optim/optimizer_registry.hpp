// The optimizer registry: an optimizer's name -> the config keys it takes, its name-dependent
// defaults, how to build it and how the MLPerf log describes it. Each optimizer's file registers
// itself with one line,
//
//   CREST_REGISTER_OPTIMIZER(lamb, lamb_type());  // an OptimizerType: name, keys, make, ...
//
// so the config reader, the trainer and the MLPerf log know no optimizer by name
// (docs/extending.md shows a whole one).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crest/optim/logged_entry.hpp"
#include "crest/optim/optimizer.hpp"
#include "crest/optim/optimizer_config.hpp"

namespace crest {

struct OptimizerType {
  std::string name;      // the config's spelling (optimizer.name: SGD), matched case-insensitively
  std::string log_name;  // the MLPerf checker's spelling (opt_name in the run's log: sgd)
  // The section's keys it reads besides name and lr (betas and eps stand for their aliases
  // optimizer_betas, beta_1, beta_2 and epsilon); every other key is refused, but for a
  // weight_decay of 0, which every resolved config prints.
  std::vector<std::string> keys;
  // May be wrapped (optimizer.larc_base names it), and the keys a wrapper then takes from it.
  bool wrappable = false;
  std::vector<std::string> keys_when_wrapped;
  // Wraps a wrappable optimizer, named by optimizer.larc_base (LARC): its keys are its own plus
  // its base's keys_when_wrapped. Its make and parameter_group build and describe the base too.
  bool wraps = false;
  // The learning rate without an lr_schedule section or optimizer.lr (the Keras default); a
  // wrapper's is its base's.
  double default_lr = 0.001;
  // Defaults that depend on the optimizer, applied when the name is read (before the other
  // keys): AdamW's weight decay 0.01. May be null.
  std::function<void(OptimizerConfig&)> set_defaults;
  // The optimizer from checked settings. Throws crest::Error (input) naming the key of a setting
  // it cannot honour.
  std::function<std::unique_ptr<Optimizer>(const OptimizerConfig&)> make;
  // The parameter group as the reference logs it, after opt_name, learning rate `lr`.
  std::function<std::vector<LoggedEntry>(const OptimizerConfig&, double lr)> parameter_group;
};

bool register_optimizer_type(OptimizerType type);

// The registered entry of `name` (exact spelling), or null.
const OptimizerType* find_optimizer_type_or_null(const std::string& name);
// The same; an unknown name throws crest::Error (input) listing the registered ones.
const OptimizerType& find_optimizer_type(const std::string& name);
// The registered spelling of `text` matched case-insensitively ("adamw" -> "AdamW"), or "".
std::string registered_optimizer_spelling(const std::string& text);
// Registered names, sorted.
std::vector<std::string> optimizer_names();

// The optimizer `config` names, built by its entry.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);
// Its parameter group as the MLPerf log writes it (after opt_name), at learning rate `lr`.
std::vector<LoggedEntry> optimizer_parameter_group(const OptimizerConfig& config, double lr);
// The learning rate without a schedule or optimizer.lr: the entry's default_lr (a wrapper's
// base's).
double optimizer_default_lr(const OptimizerConfig& config);
// The optimizers that read `key`, for messages: "LARC over SGD, LARS, SGD".
std::string optimizers_taking(const std::string& key);

#define CREST_REGISTER_OPTIMIZER(id, ...)                              \
  [[maybe_unused]] static const bool crest_optimizer_registered_##id = \
      ::crest::register_optimizer_type(__VA_ARGS__)

}  // namespace crest
