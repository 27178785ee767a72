// optimizer: Keras-form SGD, Adam, AdamW, LAMB, LARS and LARC. Its learning rate lives in
// lr_schedule (base_lr or start_lr); CosmoFlow's optimizer.lr is checked here and resolved in
// cross_section.cpp. DeepCAM's keys keep the reference's names (optimizer_betas, weight_decay).
// LARS and LARC are crest's additions, with timm's and apex's settings under crest's names.
#include "config/sections.hpp"
#include "crest/optim/layer_adaptation.hpp"

namespace crest::config {
namespace {

using S = OptimizerConfig;

bool is_sgd(const S& s) { return s.name == OptimizerKind::sgd; }
bool is_lamb(const S& s) { return s.name == OptimizerKind::lamb; }
bool is_larc(const S& s) { return s.name == OptimizerKind::larc; }
bool is_lars_family(const S& s) { return s.name == OptimizerKind::lars || is_larc(s); }
bool uses_betas(const S& s) { return !s.uses_momentum(); }

// Defaults that depend on the optimizer, so the name sets them: AdamW's weight decay 0.01 (Keras);
// LAMB's eps 1e-6 and weight decay 1e-6 (the DeepCAM reference's FusedLAMB arguments); the trust
// coefficient, LARS 0.001 (timm's, the paper's) and LARC 0.02 (apex's).
Field<S> name_field() {
  Field<S> f = required(enum_field("name", &S::name), " (SGD, Adam, AdamW, LAMB, LARS or LARC)");
  auto read = f.read;
  f.read = [read](const SectionReader& r, S& s) {
    read(r, s);
    s.weight_decay = s.name == OptimizerKind::adamw ? 0.01 : is_lamb(s) ? 1e-6 : 0.0;
    s.eps = is_lamb(s) ? 1e-6 : 1e-7;
    s.trust_coefficient = is_larc(s) ? 0.02 : 0.001;
  };
  return f;
}

// LARC's base: SGD, Adam or AdamW (not LAMB, which has a trust ratio of its own, nor LARS or LARC).
Field<S> larc_base_field() {
  Field<S> f = enum_field("larc_base", &S::larc_base);
  f.read = [](const SectionReader& r, S& s) {
    const auto text = r.opt_string("larc_base");
    if (!text) return;
    const auto kind = match_enum_spelling<OptimizerKind>(*text);
    if (!kind || (*kind != OptimizerKind::sgd && *kind != OptimizerKind::adam &&
                  *kind != OptimizerKind::adamw))
      r.fail("larc_base", "unknown value " + quote(*text) +
                              " (expected one of: SGD, Adam, AdamW, the optimizers LARC wraps)");
    s.larc_base = *kind;
  };
  return f;
}

// A list of glob patterns; an empty list is allowed (adapt every tensor). Printed quoted ("*" is
// YAML's alias mark); when not given, the defaults are printed as a comment, so that loading the
// resolved YAML again keeps them lenient (a default pattern may match nothing).
Field<S> lars_exclude_field() {
  const std::string key = "lars_exclude";
  return {key,
          [key](const SectionReader& r, S& s) {
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
            s.lars_exclude = patterns;
          },
          [key](const S& s, Lines& l) {
            if (!is_lars_family(s)) return;
            auto list = [](const std::vector<std::string>& patterns) {
              std::string out = "[";
              for (size_t i = 0; i < patterns.size(); ++i)
                out += (i ? ", " : "") + quote(patterns[i]);
              return out + "]";
            };
            if (s.lars_exclude)
              l.add(key, list(*s.lars_exclude));
            else
              l.raw("  # " + key + ": " + list(default_lars_exclusions()) +
                    " (the default: its patterns may match nothing)");
          }};
}

// A row printed only for the optimizers that use it.
Field<S> only_printed_if(Field<S> f, bool (*when)(const S&)) {
  auto print = f.print;
  f.print = [print, when](const S& s, Lines& l) {
    if (when(s)) print(s, l);
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
            if (uses_betas(s))
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
  const std::string name = enum_name(o.name);
  auto only_for = [&](const std::string& key, bool allowed, const std::string& who) {
    if (r.has(key) && !allowed)
      r.fail(key, "not used by " + name + " (only " + who + "); remove it or set it to null");
  };
  only_for("momentum", o.uses_momentum(), "SGD, LARS, LARC over SGD");
  only_for("nesterov", is_sgd(o), "SGD");
  for (const char* k : {"betas", "optimizer_betas", "beta_1", "beta_2", "eps", "epsilon"}) {
    const bool an_eps = std::string(k) == "eps" || std::string(k) == "epsilon";
    only_for(k, uses_betas(o),
             std::string("Adam, AdamW, LAMB, LARC over Adam or AdamW") +
                 (is_lars_family(o) && an_eps ? "; the trust ratio's is trust_eps" : ""));
  }
  only_for("max_grad_norm", is_lamb(o), "LAMB");
  for (const char* k : {"trust_coefficient", "trust_eps", "lars_exclude"})
    only_for(k, is_lars_family(o), "LARS, LARC");
  only_for("larc_mode", is_larc(o), "LARC");
  only_for("larc_base", is_larc(o), "LARC");
  if (is_larc(o) && !r.has("larc_base"))
    r.fail("larc_base", "required key is missing: the optimizer LARC wraps (SGD, Adam or AdamW)");
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
      {name_field(), learning_rate_field("lr"), learning_rate_field("learning_rate"),
       only_printed_if(number_field("momentum", &S::momentum, unit_interval()),
                       [](const S& s) { return s.uses_momentum(); }),
       only_printed_if(bool_field("nesterov", &S::nesterov), is_sgd), betas_field("betas"),
       unprinted(betas_field("optimizer_betas")),
       unprinted(number_field("beta_1", &S::beta1, unit_interval())),
       unprinted(number_field("beta_2", &S::beta2, unit_interval())),
       only_printed_if(number_field("eps", &S::eps, positive()), uses_betas),
       unprinted(number_field("epsilon", &S::eps, positive())),
       number_field("weight_decay", &S::weight_decay, non_negative()),
       only_printed_if(number_field("max_grad_norm", &S::max_grad_norm, positive()), is_lamb),
       only_printed_if(number_field("trust_coefficient", &S::trust_coefficient, positive()),
                       is_lars_family),
       only_printed_if(number_field("trust_eps", &S::trust_eps, non_negative()), is_lars_family),
       lars_exclude_field(), only_printed_if(enum_field("larc_mode", &S::larc_mode), is_larc),
       only_printed_if(larc_base_field(), is_larc)},
      check_optimizer};
  return t;
}

}  // namespace crest::config
