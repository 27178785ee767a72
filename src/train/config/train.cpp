// train: the reference's loss, metrics and stopping rules, then crest additions.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <sstream>

#include "config/sections.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/train/metric.hpp"
#include "crest/train/stop_signals.hpp"

namespace crest::config {
namespace {

using S = TrainConfig;

Field<S> loss_field() {
  return {"loss",
          [](const SectionReader& r, S& t) {
            const auto v = r.opt_string("loss");
            if (!v) return;
            if (fold_spelling(*v) != "mse" && fold_spelling(*v) != "meansquarederror")
              r.fail("loss", "unknown value " + quote(*v) + " (expected one of: mse)");
            t.loss = "mse";
          },
          [](const S& t, Lines& l) { l.add("loss", t.loss); }};
}

// Keras accepts a name or a list of names, with its aliases (mae, mse).
Field<S> metrics_field() {
  return {"metrics",
          [](const SectionReader& r, S& t) {
            const Entry* e = r.get("metrics");
            if (!e) return;
            std::vector<YAML::Node> items;
            if (e->value.IsSequence())
              for (const auto& item : e->value) items.emplace_back(item);
            else
              items.emplace_back(e->value);
            t.metrics.clear();
            for (size_t i = 0; i < items.size(); ++i) {
              const std::string path = "train.metrics[" + std::to_string(i) + "]";
              if (!items[i].IsScalar())
                r.source().fail(path, e->key, "expected a metric name, got " + describe(items[i]));
              const Metric* m = metric_named(items[i].Scalar());
              if (!m)
                r.source().fail(path, e->key,
                                "unknown metric " + quote(items[i].Scalar()) +
                                    " (expected one of: " + join_list(metric_names()) + ")");
              t.metrics.push_back(m->name);
            }
          },
          [](const S& t, Lines& l) { l.add("metrics", "[" + join_list(t.metrics) + "]"); }};
}

Field<S> patience_field() {
  return {"early_stopping_patience",
          [](const SectionReader& r, S& t) {
            if (auto v = r.opt_int("early_stopping_patience", 0))
              t.early_stopping_patience = static_cast<int>(*v);
          },
          [](const S& t, Lines& l) {
            if (t.early_stopping_patience)
              l.add("early_stopping_patience", std::to_string(*t.early_stopping_patience));
          }};
}

// A quality target: a validation metric's value that ends the run (task.cpp says which metric).
Field<S> target_field(const std::string& key, std::optional<double> S::*m,
                      const NumberCheck& check) {
  return {key,
          [=](const SectionReader& r, S& t) {
            if (auto v = r.opt_double(key)) {
              if (const std::string problem = check(*v); !problem.empty()) r.fail(key, problem);
              t.*m = *v;
            }
          },
          [=](const S& t, Lines& l) {
            if (t.*m) l.add(key, format_double(*(t.*m)));
          }};
}

// "N" or "N epochs" (after every N-th epoch), "N steps" (every N training steps); 0: only at the
// end of the run.
Field<S> checkpoint_every_field() {
  return {"checkpoint_every",
          [](const SectionReader& r, S& t) {
            const Entry* e = r.get("checkpoint_every");
            if (!e) return;
            const std::string text = e->value.IsScalar() ? e->value.Scalar() : std::string();
            std::istringstream in(text);
            long long n = -1;
            std::string unit, rest;
            in >> n >> unit >> rest;
            const bool ok_unit = unit.empty() || unit == "epoch" || unit == "epochs" ||
                                 unit == "step" || unit == "steps";
            if (!e->value.IsScalar() || in.bad() || n < 0 || n > (1ll << 40) || !ok_unit ||
                !rest.empty())
              r.fail("checkpoint_every",
                     "expected a count of epochs (2, \"2 epochs\") or steps (\"500 steps\"), got " +
                         describe(e->value));
            t.checkpoint_every = n;
            t.checkpoint_every_steps = unit.rfind("step", 0) == 0;
          },
          [](const S& t, Lines& l) {
            l.add("checkpoint_every", quote(std::to_string(t.checkpoint_every) +
                                            (t.checkpoint_every_steps ? " steps" : " epochs")));
          }};
}

// Seconds in "2h", "90m", "90 min", "45s", "1.5 h", "1d" or a bare number; nullopt when the
// text is none of these.
std::optional<double> duration_seconds(const std::string& text) {
  std::istringstream in(text);
  double n = -1;
  std::string unit, rest;
  in >> n;
  if (in.fail() || !(n >= 0) || !std::isfinite(n)) return std::nullopt;
  in >> unit >> rest;
  if (!rest.empty()) return std::nullopt;
  if (unit.empty() || unit == "s" || unit == "sec") return n;
  if (unit == "m" || unit == "min") return n * 60;
  if (unit == "h") return n * 3600;
  if (unit == "d") return n * 86400;
  return std::nullopt;
}

Field<S> max_wall_time_field() {
  return {"max_wall_time",
          [](const SectionReader& r, S& t) {
            const Entry* e = r.get("max_wall_time");
            if (!e) return;
            const std::string text = e->value.IsScalar() ? e->value.Scalar() : std::string();
            t.max_wall_time_auto = text == "auto";
            t.max_wall_time_s.reset();
            if (text == "auto" || text == "none") return;
            const auto s = duration_seconds(text);
            if (!s || *s <= 0)
              r.fail("max_wall_time",
                     "expected a positive duration (\"2h\", \"90m\", \"45s\", seconds), auto "
                     "(Slurm's SLURM_JOB_END_TIME) or none, got " +
                         describe(e->value));
            t.max_wall_time_s = *s;
          },
          [](const S& t, Lines& l) {
            l.add("max_wall_time", t.max_wall_time_s      ? format_double(*t.max_wall_time_s)
                                   : t.max_wall_time_auto ? "auto"
                                                          : "none");
          }};
}

// Signal names without "SIG", as kill -l prints them; the ones a scheduler sends to warn a job.
Field<S> stop_signals_field() {
  return {
      "stop_signals",
      [](const SectionReader& r, S& t) {
        const Entry* e = r.get("stop_signals");
        if (!e) return;
        t.stop_signals.clear();
        std::vector<YAML::Node> items;
        if (e->value.IsSequence())
          for (const auto& item : e->value) items.emplace_back(item);
        else
          items.emplace_back(e->value);
        for (const auto& item : items) {
          std::string name = item.IsScalar() ? item.Scalar() : std::string();
          if (name.rfind("SIG", 0) == 0) name = name.substr(3);
          if (signal_number(name) == 0)
            r.fail("stop_signals",
                   "unknown signal " + describe(item) +
                       " (expected a list of: TERM, INT, USR1, USR2, HUP, QUIT, XCPU)");
          t.stop_signals.push_back(name);
        }
      },
      [](const S& t, Lines& l) { l.add("stop_signals", "[" + join_list(t.stop_signals) + "]"); }};
}

// The scaler's settings, in the ranges crest/optim/loss_scaler.hpp accepts: a scale between 1
// and Apex's 2^24 ceiling, a growth above 1, a back-off in (0, 1) (torch asserts the same).
NumberCheck loss_scale_range() {
  return [](double v) {
    return v >= LossScaler::kMinScale && v <= LossScaler::kMaxScale
               ? ""
               : "must be in [1, 16777216] (2^24), got " + format_double(v);
  };
}

NumberCheck above_one() {
  return [](double v) { return v > 1 ? "" : "must be above 1, got " + format_double(v); };
}

NumberCheck open_unit_interval() {
  return [](double v) {
    return v > 0 && v < 1 ? "" : "expected a value in (0, 1), got " + format_double(v);
  };
}

// A {steps: N, start_epoch: E} mapping (local_sgd's, gradient_lag's): N in [min_steps,
// max_steps], E >= 0. `other` reads a key of the caller's own (returns false for one it does not
// know); unknown keys are refused naming them and `accepts`.
void read_steps_from_epoch(const SectionReader& r, const Entry& e, const std::string& key,
                           int64_t min_steps, int64_t max_steps, int64_t& steps,
                           int64_t& start_epoch, const std::string& accepts,
                           const std::function<bool(const std::string& at, const YAML::Node& k,
                                                    const YAML::Node& v)>& other = {}) {
  const std::string path = r.path_of(key);
  for (auto kv = e.value.begin(); kv != e.value.end(); ++kv) {
    const std::string name = kv->first.IsScalar() ? kv->first.Scalar() : "?";
    const std::string at = path + "." + name;
    if (name == "steps")
      steps = r.to_int(at, kv->first, kv->second, min_steps, max_steps);
    else if (name == "start_epoch")
      start_epoch = r.to_int(at, kv->first, kv->second, 0, 1 << 30);
    else if (!other || !other(at, kv->first, kv->second))
      r.source().fail(at, kv->first, "unknown key (" + key + " accepts: " + accepts + ")");
  }
}

// gradient_lag.correction: none | local.
bool read_lag_correction(const SectionReader& r, const std::string& at, const YAML::Node& k,
                         const YAML::Node& v, bool& local) {
  const std::string value = v.IsScalar() ? v.Scalar() : "";
  if (value != "none" && value != "local")
    r.source().fail(at, k, "expected none or local, got " + describe(v));
  local = value == "local";
  return true;
}

// gradient_lag: 0 | 1, or {steps: 0 | 1, start_epoch: E, correction: none | local} (synchronous
// epochs first, then the lag: its stable steps are far smaller, and a network's first epochs are
// often its sharpest; the local correction: docs/distributed.md "Gradient lag").
Field<S> gradient_lag_field() {
  return {"gradient_lag",
          [](const SectionReader& r, S& t) {
            const Entry* e = r.get("gradient_lag");
            if (!e || e->value.IsNull()) return;
            if (e->value.IsScalar()) {
              t.gradient_lag = static_cast<int>(*r.opt_int("gradient_lag", 0, 1));
              return;
            }
            if (!e->value.IsMap())
              r.fail("gradient_lag",
                     "expected 0, 1 or {steps: 0 | 1, start_epoch: E, correction: none | local}, "
                     "got " +
                         describe(e->value));
            int64_t steps = 1;
            read_steps_from_epoch(
                r, *e, "gradient_lag", 0, 1, steps, t.gradient_lag_start_epoch,
                "steps, start_epoch, correction",
                [&](const std::string& at, const YAML::Node& k, const YAML::Node& v) {
                  return at.ends_with(".correction") &&
                         read_lag_correction(r, at, k, v, t.gradient_lag_local_correction);
                });
            t.gradient_lag = static_cast<int>(steps);
            if (t.gradient_lag_local_correction && t.gradient_lag == 0)
              r.fail("gradient_lag", "correction: local corrects a lag: it needs steps: 1");
          },
          [](const S& t, Lines& out) {
            const std::string steps = std::to_string(t.gradient_lag);
            if (t.gradient_lag_start_epoch == 0 && !t.gradient_lag_local_correction)
              out.add("gradient_lag", steps);
            else
              out.add("gradient_lag",
                      "{steps: " + steps +
                          ", start_epoch: " + std::to_string(t.gradient_lag_start_epoch) +
                          (t.gradient_lag_local_correction ? ", correction: local" : "") + "}");
          }};
}

// local_sgd: {steps: H, start_epoch: E}, keys of its own.
Field<S> local_sgd_field() {
  return {"local_sgd",
          [](const SectionReader& r, S& t) {
            const Entry* e = r.get("local_sgd");
            if (!e || e->value.IsNull()) return;
            if (!e->value.IsMap())
              r.fail("local_sgd", "expected {steps: H, start_epoch: E}, got " + describe(e->value));
            read_steps_from_epoch(r, *e, "local_sgd", 1, 1 << 20, t.local_sgd_steps,
                                  t.local_sgd_start_epoch, "steps, start_epoch");
          },
          [](const S& t, Lines& out) {
            if (t.local_sgd_steps > 1)
              out.add("local_sgd", "{steps: " + std::to_string(t.local_sgd_steps) +
                                       ", start_epoch: " + std::to_string(t.local_sgd_start_epoch) +
                                       "}");
          }};
}

// Local SGD exchanges nothing between its averagings: what needs a per-step exchange, or a
// checkpoint between two averagings, is refused.
void check_local_sgd(const SectionReader& r, const S& t) {
  const int64_t h = t.local_sgd_steps;
  if (h <= 1) return;
  const std::string with = "local_sgd.steps " + std::to_string(h) + " with ";
  if (t.gradient_lag > 0)
    r.fail("local_sgd",
           with + "gradient_lag 1 is not supported (each hides communication its own way)");
  // A local step is an optimizer step: k micro-batches with accumulation, which steps count.
  const int64_t window = h * t.gradient_accumulation_frequency;
  if (t.checkpoint_every_steps && t.checkpoint_every % window != 0)
    r.fail("local_sgd", with + "checkpoint_every \"" + std::to_string(t.checkpoint_every) +
                            " steps\": step checkpoints must fall where the models are averaged "
                            "(a multiple of " +
                            std::to_string(window) + " steps)");
}

// A run has one quality target. A checkpoint between two micro-batches of one optimizer step would
// need every rank's partial gradient sum; step-counted checkpoints therefore fall on optimizer
// steps.
void check_train(const SectionReader& r, S& t) {
  const std::pair<const char*, bool> targets[] = {{"target_mae", t.target_mae.has_value()},
                                                  {"target_iou", t.target_iou.has_value()},
                                                  {"target_top1", t.target_top1.has_value()}};
  const char* first = nullptr;
  for (const auto& [key, given] : targets) {
    if (!given) continue;
    if (first)
      r.fail(key, std::string("a run has one quality target; train.") + first + " is given too");
    first = key;
  }
  const int k = t.gradient_accumulation_frequency;
  if (t.checkpoint_every_steps && t.checkpoint_every % k != 0)
    r.fail("checkpoint_every",
           "\"" + std::to_string(t.checkpoint_every) +
               " steps\" is not a multiple of gradient_accumulation_frequency " +
               std::to_string(k) +
               " (checkpoints between the micro-batches of one optimizer "
               "step are not supported)");
  check_local_sgd(r, t);
  if (t.gradient_lag_start_epoch > 0 && t.gradient_lag == 0)
    r.fail("gradient_lag", "start_epoch " + std::to_string(t.gradient_lag_start_epoch) +
                               " with steps 0: there is no lag to start (give steps: 1)");
}

}  // namespace

const Table<TrainConfig>& train_table() {
  static const Table<S> t{
      "train",
      {loss_field(), metrics_field(), patience_field(),
       target_field("target_mae", &S::target_mae, positive()),
       target_field("target_iou", &S::target_iou, positive_up_to(1)),
       target_field("target_top1", &S::target_top1, positive_up_to(1)),
       // crest additions
       checkpoint_every_field(), int_field("checkpoint_keep", &S::checkpoint_keep, 1, 1 << 20),
       number_field("log_every_s", &S::log_every_s, positive()), bool_field("report", &S::report),
       // the DeepCAM reference's
       int_field("gradient_accumulation_frequency", &S::gradient_accumulation_frequency, 1),
       // crest: the Gordon Bell run's one-step gradient lag
       gradient_lag_field(),
       // crest: local SGD (Lin et al., ICLR 2020)
       local_sgd_field(),
       // crest: ending early and cleanly
       stop_signals_field(), max_wall_time_field(), enum_field("on_nonfinite", &S::on_nonfinite),
       int_field("max_rollbacks", &S::max_rollbacks, 0, 1000),
       enum_field("checkpoint_failures", &S::checkpoint_failures),
       // crest: dynamic loss scaling (mixed precision)
       enum_field("loss_scaling", &S::loss_scaling),
       number_field("loss_scale_initial", &S::loss_scale_initial, loss_scale_range()),
       int_field("loss_scale_growth_interval", &S::loss_scale_growth_interval, 1),
       number_field("loss_scale_growth_factor", &S::loss_scale_growth_factor, above_one()),
       number_field("loss_scale_backoff_factor", &S::loss_scale_backoff_factor,
                    open_unit_interval())},
      check_train};
  return t;
}

}  // namespace crest::config
