// optimizer: a registered optimizer (crest/optim/optimizer_registry.hpp: Keras-form SGD, Adam,
// AdamW, LAMB, LARS, LARC) and the keys it takes, from one vocabulary. Its learning rate lives in
// lr_schedule (base_lr or start_lr); CosmoFlow's optimizer.lr is checked here and resolved in
// cross_section.cpp. DeepCAM's keys keep the reference's names (optimizer_betas, weight_decay).
// LARS and LARC are crest's additions, with timm's and apex's settings under crest's names.
#include "config/sections.hpp"
#include "crest/optim/layer_adaptation.hpp"
#include "crest/optim/optimizer_registry.hpp"

namespace crest::config {
namespace {

using S = OptimizerConfig;

// Defaults that depend on the optimizer (AdamW's weight decay, ...), so the name sets them: each
// entry's set_defaults, over the section's general defaults.
Field<S> name_field() {
  Field<S> f = registered_name_field("name", &S::name, optimizer_names);
  auto read = f.read;
  f.read = [read](const SectionReader& r, S& s) {
    read(r, s);
    const S general;
    s.weight_decay = general.weight_decay;
    s.eps = general.eps;
    s.trust_coefficient = general.trust_coefficient;
    if (const auto& defaults = find_optimizer_type(s.name).set_defaults) defaults(s);
  };
  return f;
}

// The optimizers a wrapper (LARC) may wrap: "Adam, AdamW, SGD".
std::string wrappable_names() {
  std::vector<std::string> bases;
  for (const auto& n : optimizer_names())
    if (find_optimizer_type(n).wrappable) bases.push_back(n);
  return join_names(bases);
}

// The optimizer a wrapper (LARC) wraps: a registered optimizer that allows it.
Field<S> larc_base_field() {
  const std::string key = "larc_base";
  return {key,
          [key](const SectionReader& r, S& s) {
            const auto text = r.opt_string(key);
            if (!text) return;
            const std::string name = registered_optimizer_spelling(*text);
            if (name.empty() || !find_optimizer_type(name).wrappable)
              r.fail(key, "unknown value " + quote(*text) + " (expected one of: " +
                              wrappable_names() + ", the optimizers LARC wraps)");
            s.larc_base = name;
          },
          [key](const S& s, Lines& l) { l.add(key, s.larc_base); }};
}

// ["*.bias", "*.bn.weight"]: quoted, as the resolved YAML must hold them.
std::string list_of_patterns(const std::vector<std::string>& patterns) {
  std::string out = "[";
  for (size_t i = 0; i < patterns.size(); ++i) out += (i ? ", " : "") + quote(patterns[i]);
  return out + "]";
}

// A list of glob patterns (lars_exclude, weight_decay_exclude); an empty list is allowed (adapt or
// decay every tensor). Printed quoted ("*" is YAML's alias mark); when not given, the defaults are
// printed as a comment, so that loading the resolved YAML again keeps them lenient (a default
// pattern may match nothing) and keeps the one-dimensional rule.
Field<S> exclusion_field(const std::string& key, std::optional<std::vector<std::string>> S::*member,
                         const std::string& default_text) {
  return {key,
          [key, member](const SectionReader& r, S& s) {
            const Entry* e = r.get(key);
            if (!e) return;
            if (!e->value.IsSequence())
              r.fail(key, "expected a list of glob patterns such as [\"*.bias\"], got " +
                              describe(e->value));
            std::vector<std::string> patterns;
            for (size_t i = 0; i < e->value.size(); ++i) {
              const YAML::Node& item = e->value[i];
              if (!item.IsScalar() || item.Scalar().empty())
                r.source().fail(r.path_of(key) + "[" + std::to_string(i) + "]", e->key,
                                "expected a non-empty glob pattern, got " + describe(item));
              patterns.push_back(item.Scalar());
            }
            s.*member = patterns;
          },
          [key, member, default_text](const S& s, Lines& l) {
            if (!s.takes(key)) return;
            if (s.*member)
              l.add(key, list_of_patterns(*(s.*member)));
            else
              l.raw("  # " + key + ": " + default_text);
          }};
}

// A row printed only for the optimizers that take its key.
Field<S> printed_if_taken(Field<S> f) {
  auto print = f.print;
  f.print = [print, key = f.key](const S& s, Lines& l) {
    if (s.takes(key)) print(s, l);
  };
  return f;
}

// `betas`, or the DeepCAM reference's name for it (`optimizer_betas`, unprinted).
Field<S> betas_field(const std::string& key) {
  return {key,
          [key](const SectionReader& r, S& s) {
            const Entry* e = r.get(key);
            if (!e) return;
            if (!e->value.IsSequence() || e->value.size() != 2)
              r.fail(key, "expected [beta1, beta2], got " + describe(e->value));
            double b[2];
            for (size_t i = 0; i < 2; ++i) {
              b[i] =
                  r.to_double(r.path_of(key) + "[" + std::to_string(i) + "]", e->key, e->value[i]);
              if (const auto p = unit_interval()(b[i]); !p.empty()) r.fail(key, p);
            }
            s.beta1 = b[0], s.beta2 = b[1];
          },
          [](const S& s, Lines& l) {
            if (s.takes("betas"))
              l.add("betas", "[" + format_double(s.beta1) + ", " + format_double(s.beta2) + "]");
          }};
}

// Checked here, kept nowhere: cross_section.cpp makes it lr_schedule.base_lr.
Field<S> learning_rate_field(const std::string& key) {
  return {key,
          [key](const SectionReader& r, S&) {
            if (auto v = r.opt_double(key))
              if (const auto p = positive()(*v); !p.empty()) r.fail(key, p);
          },
          nullptr};
}

// An alias of a printed key (the Keras names beta_1, epsilon).
Field<S> unprinted(Field<S> f) {
  f.print = nullptr;
  return f;
}

// Each optimizer takes only its own settings: a momentum given to Adam would be ignored, and a
// silently ignored hyperparameter is a wrong experiment. Two names of one setting are refused.
void check_optimizer(const SectionReader& r, S& o) {
  static const std::vector<std::pair<const char*, const char*>> kAliases = {
      {"momentum", "momentum"},
      {"nesterov", "nesterov"},
      {"betas", "betas"},
      {"optimizer_betas", "betas"},
      {"beta_1", "betas"},
      {"beta_2", "betas"},
      {"eps", "eps"},
      {"epsilon", "eps"},
      {"max_grad_norm", "max_grad_norm"},
      {"weight_decay", "weight_decay"},
      {"trust_coefficient", "trust_coefficient"},
      {"trust_eps", "trust_eps"},
      {"lars_exclude", "lars_exclude"},
      {"momentum_form", "momentum_form"},
      {"weight_decay_exclude", "weight_decay_exclude"},
      {"larc_mode", "larc_mode"},
      {"larc_base", "larc_base"}};
  for (const auto& [key, setting] : kAliases) {
    if (!r.has(key) || o.takes(setting)) continue;
    // Printed for every optimizer (resolved configs read back): 0 means none.
    if (std::string(key) == "weight_decay" && o.weight_decay == 0) continue;
    const bool an_eps = std::string(setting) == "eps";
    const std::string who =
        find_optimizer_type(o.name).wraps ? o.name + " over " + o.larc_base : o.name;
    r.fail(key, "not used by " + who + " (only " + optimizers_taking(setting) +
                    (an_eps && o.takes("trust_eps") ? "; the trust ratio's is trust_eps" : "") +
                    "); remove it or set it to null");
  }
  if (o.nesterov && o.takes("nesterov") && !(o.momentum > 0))
    r.fail("nesterov",
           "Nesterov's look-ahead is a momentum step: it needs optimizer.momentum above 0 "
           "(momentum is 0, SGD's default)");
  if (find_optimizer_type(o.name).wraps && !r.has("larc_base"))
    r.fail("larc_base", "required key is missing: the optimizer " + o.name + " wraps (" +
                            wrappable_names() + ")");
  for (const auto& [a, b] : {std::pair{"lr", "learning_rate"},
                             {"eps", "epsilon"},
                             {"betas", "optimizer_betas"},
                             {"betas", "beta_1"},
                             {"betas", "beta_2"},
                             {"optimizer_betas", "beta_1"},
                             {"optimizer_betas", "beta_2"}})
    if (r.has(a) && r.has(b))
      r.fail(b, std::string("same setting as optimizer.") + a + "; give only one");
}

}  // namespace

const Table<OptimizerConfig>& optimizer_table() {
  static const Table<S> t{
      "optimizer",
      {name_field(),
       learning_rate_field("lr"),
       learning_rate_field("learning_rate"),
       printed_if_taken(number_field("momentum", &S::momentum, unit_interval())),
       printed_if_taken(bool_field("nesterov", &S::nesterov)),
       betas_field("betas"),
       unprinted(betas_field("optimizer_betas")),
       unprinted(number_field("beta_1", &S::beta1, unit_interval())),
       unprinted(number_field("beta_2", &S::beta2, unit_interval())),
       printed_if_taken(number_field("eps", &S::eps, positive())),
       unprinted(number_field("epsilon", &S::eps, positive())),
       number_field("weight_decay", &S::weight_decay, non_negative()),
       printed_if_taken(number_field("max_grad_norm", &S::max_grad_norm, positive())),
       printed_if_taken(number_field("trust_coefficient", &S::trust_coefficient, positive())),
       printed_if_taken(number_field("trust_eps", &S::trust_eps, non_negative())),
       exclusion_field("lars_exclude", &S::lars_exclude,
                       list_of_patterns(default_lars_exclusions()) +
                           " (the default: its patterns may match nothing)"),
       exclusion_field("weight_decay_exclude", &S::weight_decay_exclude,
                       "every one-dimensional tensor: biases, normalisation (the default)"),
       printed_if_taken(enum_field("momentum_form", &S::lars_momentum_form)),
       printed_if_taken(enum_field("larc_mode", &S::larc_mode)),
       printed_if_taken(larc_base_field())},
      check_optimizer};
  return t;
}

}  // namespace crest::config
