// A network's facts for the scaling model, from plan-only compiles of the config's model.
#include "crest/plan/model_facts.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "crest/dist/communicator.hpp"
#include "crest/engine/training_session.hpp"
#include "crest/train/task.hpp"

namespace crest {

double ModelFacts::forward_flops() const {
  double f = 0;
  for (const LayerFacts& l : layers) f += l.forward_flops;
  return f;
}

double ModelFacts::backward_flops() const {
  double f = 0;
  for (const LayerFacts& l : layers) f += l.backward_flops;
  return f;
}

size_t ModelFacts::arena_bytes(double batch) const {
  const double per_sample = static_cast<double>(arena_batch2) - static_cast<double>(arena_batch1);
  const double bytes = static_cast<double>(arena_batch1) + std::max(per_sample, 0.0) * (batch - 1);
  return static_cast<size_t>(std::max(bytes, 0.0));
}

namespace {

Shape per_sample(const Shape& s) {
  std::vector<int64_t> d = s.to_vector();
  if (!d.empty()) d.erase(d.begin());
  return Shape(d);
}

// A plan-only compile of the config's model on one process at `batch` (nothing is allocated for
// activations).
SessionOptions plan_options(const Config& config, int64_t batch) {
  SessionOptions so;
  so.backend = config.crest.backend;
  so.threads = 1;
  so.precision = config.crest.precision;
  so.batch = batch;
  so.seed = config.data.seed;
  so.allocate = false;
  return so;
}

// Three significant digits: "0.9", "0.1", "38".
std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

// Where the local correction trained what the plain lag did not (SGD with momentum, Adam; not
// LAMB, whose caution therefore names none): the plain lag's note points to it, and to the
// `data + corrected lag` candidate beside it.
constexpr char kCorrectedLag[] =
    "train.gradient_lag.correction: local trained CosmoFlow's fixture within 7 % of synchronous "
    "training (docs/convergence.md)";

std::string lag_caution(const OptimizerConfig& optimizer) {
  // Adam's and LAMB's first moments are momenta too.
  if (optimizer.takes("betas") && optimizer.beta1 > 0) {
    const std::string by =
        "the lag under " + optimizer.name + " (beta1 " + short_number(optimizer.beta1) + "): ";
    if (optimizer.name == "LAMB")
      return by +
             "DeepCAM's fixture trained as fast as synchronously, CosmoFlow's missed in 20 epochs "
             "the target synchronous training reached in 9-11 (docs/convergence.md)";
    return by +
           "CosmoFlow's fixture missed in 20 epochs the target synchronous training reached in "
           "7; " +
           std::string(kCorrectedLag);
  }
  const double m = optimizer.momentum;
  if (!optimizer.uses_momentum() || !(m > 0)) return {};
  const std::string by = "the lag under " + optimizer.name + " momentum " + short_number(m);
  if (optimizer.nesterov)
    return by + " (Nesterov): stable only for steps far below synchronous ones; " + kCorrectedLag;
  return by + ": stable only for lr·h < " + short_number(1 - m) + ", " +
         short_number(2 * (1 + m) / (1 - m)) + "x below synchronous; " + kCorrectedLag;
}

std::string corrected_lag_caution(const OptimizerConfig& optimizer) {
  const std::string& name = optimizer.name;
  if (name == "LAMB" || (name == "LARC" && optimizer.larc_base == "LAMB"))
    return "the corrected lag under LAMB: CosmoFlow's fixture missed in 20 epochs the target "
           "synchronous training reached in 11-12, worse than with the plain lag "
           "(docs/convergence.md)";
  if (name == "LARS" || name == "LARC")
    return "the corrected lag under " + name +
           ": its trust ratios act rank by rank, as LAMB's, under which the correction did "
           "not train CosmoFlow's fixture; not measured (docs/convergence.md)";
  return {};
}

ModelFacts model_facts(const Config& config) {
  const Task task = make_task(config);
  auto comm = make_single_process_communicator();
  ModelFacts m;
  m.model = task.name;
  m.precision = enum_name(config.crest.precision);
  m.sample = config.data.model_sample_shape();
  m.sample_bytes = static_cast<size_t>(m.sample.numel()) * sizeof(float);
  // At batch 1 with the optimizer (its state's size), at batch 2 the program alone (the arena's
  // growth per sample).
  TrainingSessionOptions to;
  to.session = plan_options(config, 1);
  to.optimizer = config.optimizer;
  to.accumulation = config.train.gradient_accumulation_frequency;
  to.gradient_lag = false;  // the lag's copies are gradient_lag_bytes, for lag candidates only
  const auto one = std::make_unique<TrainingSession>(task.model.graph, to, *comm);
  const auto two = std::make_unique<Session>(task.model.graph, plan_options(config, 2));
  const Executor& ex = one->executor();
  m.backend = one->backend().name();
  m.parameter_bytes = ex.params().bytes();
  m.trainable_bytes = ex.params().trainable_bytes();
  for (const auto& state : one->optimizer().state())
    m.optimizer_state_bytes += state.second->bytes();
  m.gradient_lag_bytes = 2 * (m.trainable_bytes + ParamStore::kSidebandBytes);
  m.lag_caution = lag_caution(config.optimizer);
  m.corrected_lag_caution = corrected_lag_caution(config.optimizer);
  m.arena_batch1 = ex.plan().arena_bytes;
  m.arena_batch2 = two->executor().plan().arena_bytes;
  std::string previous_kind;
  for (const OpFacts& op : ex.op_facts()) {
    LayerFacts l;
    l.name = op.name;
    l.kind = op.kind;
    l.in = per_sample(op.in);
    l.out = per_sample(op.out);
    l.forward_flops = op.flops.forward;
    l.backward_flops = op.flops.backward_data + op.flops.backward_weights;
    l.trainable_bytes = op.trainable_bytes;
    l.windows = op.windows;
    l.dense_on_features = op.kind == "dense" && previous_kind == "flatten";
    l.batch_norm = op.kind == "batch_norm";
    previous_kind = op.kind;
    m.layers.push_back(std::move(l));
  }
  return m;
}

}  // namespace crest
