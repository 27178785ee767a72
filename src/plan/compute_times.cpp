// Per-layer compute times for the scaling model.
#include "compute_times.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "crest/core/error.hpp"

namespace crest {
namespace {

bool same_flops(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(a, b) + 1e-3; }

int ranks_of(const std::vector<int>& parts) {
  int n = 1;
  for (int p : parts) n *= p;
  return n;
}

// The measured layer is the model's: the same name, and the same forward FLOPs per sample — or,
// measured on a block of a split into `ranks`, between a block's share and the whole (the
// layers after the split run whole).
bool same_layer(const MeasuredLayer& measured, const LayerFacts& l, int ranks) {
  if (ranks == 1) return same_flops(measured.forward_flops, l.forward_flops);
  return measured.forward_flops >= 0.9 * l.forward_flops / ranks &&
         measured.forward_flops <= l.forward_flops * (1 + 1e-6) + 1e-3;
}

// The layers of `t` that are the model's.
std::map<size_t, const MeasuredLayer*> matches(const ModelFacts& model, const MeasuredTraining& t) {
  std::map<std::string, const MeasuredLayer*> by_name;
  for (const MeasuredLayer& l : t.layers) by_name[l.name] = &l;
  std::map<size_t, const MeasuredLayer*> m;
  const int ranks = ranks_of(t.spatial);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const auto it = by_name.find(model.layers[i].name);
    if (it != by_name.end() && same_layer(*it->second, model.layers[i], ranks)) m[i] = it->second;
  }
  return m;
}

// The cores one rank of `t` computed with: its threads, or its share of the node's cores where
// more threads ran on the node than it has (independent ranks side by side).
double measured_cores(const MeasuredTraining& t, const Machine& machine) {
  if (machine.cores_per_node <= 0) return t.threads;
  return std::min<double>(t.threads, static_cast<double>(machine.cores_per_node) / t.node_ranks);
}

// The measurement that covers most of the model's layers, on its backend and precision; among
// equals the one whose ranks on the node are closest to `node_ranks` (ranks computing side by
// side slow each other: shared caches, memory bandwidth, clocks), then whose cores per rank are
// closest to `threads`.
const MeasuredTraining* best_measurement(const ModelFacts& model, const Machine& machine,
                                         const RankShare& rank, const std::vector<int>& spatial) {
  const MeasuredTraining* best = nullptr;
  size_t best_count = 0;
  std::pair<double, double> best_distance;
  for (const MeasuredTraining& t : machine.measured_training) {
    if (t.backend != model.backend || t.precision != model.precision) continue;
    if (t.spatial != spatial) continue;
    const size_t count = matches(model, t).size();
    const std::pair<double, double> distance{
        std::abs(std::log(static_cast<double>(t.node_ranks) / rank.node_ranks)),
        std::abs(std::log(measured_cores(t, machine) / rank.threads))};
    if (count > best_count || (count == best_count && count > 0 && distance < best_distance)) {
      best = &t;
      best_count = count;
      best_distance = distance;
    }
  }
  return best;
}

// FLOP/s of the measured layers: forward and backward together.
double measured_rate(const MeasuredTraining& t, const ModelFacts& model) {
  double flops = 0, seconds = 0;
  for (const auto& [i, l] : matches(model, t)) {
    flops += model.layers[i].forward_flops + model.layers[i].backward_flops;
    seconds += l->forward_s + l->backward_s;
  }
  return seconds > 0 ? flops / seconds : 0;
}

}  // namespace

ComputeTimes compute_times(const ModelFacts& model, const Machine& machine, const RankShare& rank,
                           const std::vector<int>& spatial) {
  ComputeTimes c;
  c.layers.resize(model.layers.size());
  const double threads = rank.threads;
  const bool split = ranks_of(spatial) > 1;
  const MeasuredTraining* t = split ? best_measurement(model, machine, rank, spatial) : nullptr;
  c.split_measured = t != nullptr;
  if (!t) t = best_measurement(model, machine, rank, {});
  // A CPU rank's time scales with the cores it gets; a device's does not.
  const double scale =
      t && machine.cores_per_node > 0 ? measured_cores(*t, machine) / threads : 1.0;
  const auto found = t ? matches(model, *t) : std::map<size_t, const MeasuredLayer*>{};
  double rate = machine.gflops_per_rank > 0   ? machine.gflops_per_rank * 1e9
                : machine.gflops_per_core > 0 ? machine.gflops_per_core * 1e9 * threads
                                              : 0;
  c.source = ComputeSource::given_rate;
  if (rate == 0 && t) {
    rate = measured_rate(*t, model) / scale;
    c.source = ComputeSource::measured_rate;
  }
  size_t estimated = 0;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (const auto it = found.find(i); it != found.end()) {
      c.layers[i] = {it->second->forward_s * scale, it->second->backward_s * scale};
      continue;
    }
    const LayerFacts& l = model.layers[i];
    if (l.forward_flops + l.backward_flops == 0) continue;
    if (rate <= 0)
      throw_usage("crest plan: " + machine.file + " has no compute rate for " + model.model +
                  " (layer " + l.name +
                  "): give compute.gflops_per_rank or compute.gflops_per_core, or measure the "
                  "model with crest bench train --profile and crest plan calibrate");
    c.layers[i] = {l.forward_flops / rate, l.backward_flops / rate};
    ++estimated;
  }
  if (t && estimated == 0) c.source = ComputeSource::measured;
  if (t) {
    c.update_s = t->update_s * scale * static_cast<double>(model.trainable_bytes) /
                 std::max<double>(1, static_cast<double>(t->trainable_bytes));
    std::ostringstream os;
    os << "compute: " << found.size() << " of " << model.layers.size()
       << " layers measured (crest bench train --profile, " << t->threads << " threads";
    if (t->node_ranks > 1) os << " on each of " << t->node_ranks << " independent ranks";
    os << ", batch " << t->batch << (c.split_measured ? ", split" : "") << ")";
    if (scale != 1) os << ", scaled to " << threads << " threads";
    c.notes.push_back(os.str());
  } else {
    c.notes.emplace_back(
        "compute: FLOPs at the given rate; the optimizer's time is not counted "
        "(no measurement)");
  }
  return c;
}

}  // namespace crest
