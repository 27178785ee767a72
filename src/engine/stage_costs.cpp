// What a pipeline's cut balances, per node of the whole graph (pipeline_training_session.hpp):
// the planned FLOPs of a training step, or the measured seconds.
#include <algorithm>
#include <chrono>
#include <map>

#include "crest/engine/pipeline_training_session.hpp"
#include "crest/engine/random_batch.hpp"

namespace crest {

namespace {

// The seconds a stage spends adding one micro-batch's gradients into its batch's sum, per
// gradient element (PipelineStage::backward: one pass over the stage's trainable gradients): the
// best of three passes over the whole model's.
double accumulation_s_per_element(const ParamStore& p) {
  const size_t n = p.trainable_count_padded();
  Buffer sum(p.bytes(), 256, p.memory());
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    p.ops().add(sum.data(), p.grads(), sum.data(), n);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best / static_cast<double>(std::max<size_t>(n, 1));
}

}  // namespace

// ResNet-50's last blocks at a small resolution are layers with many parameters and few FLOPs.
std::vector<double> measured_node_costs(const BuiltModel& m, SessionOptions so) {
  constexpr int kProfiled = 3;
  so.spatial = nullptr;
  so.split_outputs = false;
  so.allocate = true;
  const Graph& g = m.graph;
  const Session session(g, so);
  Executor& ex = session.executor();
  fill_random_batch(ex, m, session.backend());
  for (int i = 0; i <= kProfiled; ++i) {
    ex.set_profiling(i > 0);
    ex.forward();
    ex.backward();
  }
  std::map<std::string, double> by_name;
  for (const OpProfile& op : ex.profile())
    by_name[op.name] += (op.forward_s + op.backward_s) / kProfiled;
  const ParamStore& p = ex.params();
  const double per_element = accumulation_s_per_element(p);
  for (const ParamSlot& slot : p.slots())
    if (slot.spec.trainable)  // "<node>.<param>"
      by_name[slot.name.substr(0, slot.name.rfind('.'))] +=
          per_element * static_cast<double>(slot.count);
  return per_node_costs(g, by_name);
}

std::vector<double> per_node_costs(const Graph& graph,
                                   const std::map<std::string, double>& by_name) {
  std::vector<double> costs;
  for (const GraphNode& n : graph.nodes()) {
    const auto it = by_name.find(n.name);
    costs.push_back(it == by_name.end() ? 0 : it->second);
  }
  return costs;
}

std::vector<double> stage_compute_means(const PipelineRanks& at, double mine, Communicator& world) {
  std::vector<double> s(static_cast<size_t>(at.stages), 0);
  s[static_cast<size_t>(at.stage)] = mine / (at.group_size * at.replicas);
  world.allreduce_sum(s.data(), s.size());
  return s;
}

std::vector<double> rebalanced_costs(const std::vector<double>& costs, int stages,
                                     const std::vector<double>& stage_s) {
  if (costs.empty()) return {};
  const std::vector<size_t> starts = balanced_stage_starts(costs, stages);
  std::vector<double> scaled = costs_scaled_to_stages(costs, starts, stage_s);
  if (balanced_stage_starts(scaled, stages) == starts) return {};
  return scaled;
}

std::vector<double> probe_stage_compute(PipelineTrainingSession& s, const BuiltModel& m,
                                        int batches, Communicator& world) {
  const std::vector<std::string>& inputs = s.stage_graph().data_inputs;
  auto feed = [&](int, Executor& ex) {
    if (!inputs.empty()) fill_random_batch(ex, m, s.backend(), inputs);
  };
  s.step().run(1e-3, feed);
  std::vector<double> least;
  for (int b = 0; b < batches; ++b) {
    const std::vector<double> times =
        stage_compute_means(s.ranks(), s.step().run(1e-3, feed).compute_s, world);
    if (least.empty()) least = times;
    for (size_t i = 0; i < times.size(); ++i) least[i] = std::min(least[i], times[i]);
  }
  return least;
}

std::vector<double> node_training_flops(const Graph& graph, const Executor& plan) {
  std::map<std::string, double> by_name;
  for (const OpFacts& op : plan.op_facts()) {
    double f = op.flops.forward;
    if (op.runs_backward) f += op.flops.backward_data + op.flops.backward_weights;
    by_name[op.name] += f;
  }
  return per_node_costs(graph, by_name);
}

}  // namespace crest
