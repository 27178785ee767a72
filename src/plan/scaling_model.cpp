// The scaling model (docs/scaling.md): per-layer compute times, simulated gradient buckets,
// halo and pipeline traffic, memory and I/O, for one decomposition of one global batch.
#include "crest/plan/scaling_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <numbers>
#include <numeric>

#include "compute_times.hpp"
#include "crest/core/error.hpp"
#include "crest/graph/pipeline_cut.hpp"
#include "crest/spatial/decomposition.hpp"

namespace crest {

int Decomposition::spatial_ranks() const {
  int n = 1;
  for (int p : spatial) n *= p;
  return n;
}

int Decomposition::data_parallel() const {
  return std::max(1, ranks / (spatial_ranks() * pipeline_stages));
}

namespace {

std::string list_text(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string compact_list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::string Decomposition::name() const {
  std::string s;
  if (spatial_ranks() > 1) s = "spatial " + list_text(spatial);
  if (pipeline_stages > 1)
    s = "pipeline " + std::to_string(pipeline_stages) + " stages x " +
        std::to_string(micro_batches) + " micro" + (s.empty() ? "" : ", " + s);
  const int d = data_parallel();
  if (s.empty())
    return ranks == 1            ? "one rank"
           : lag_correction      ? "data + corrected lag"
           : gradient_lag        ? "data + lag"
           : local_sgd_steps > 1 ? "local SGD (" + std::to_string(local_sgd_steps) + " steps)"
                                 : "data";
  if (d > 1) s += " x " + std::to_string(d) + " data";
  return gradient_lag ? s + (lag_correction ? " + corrected lag" : " + lag") : s;
}

std::vector<std::string> Prediction::overrides() const {
  std::vector<std::string> o{"data.batch_size=" + std::to_string(batch_per_replica)};
  if (d.spatial_ranks() > 1) o.push_back("dist.spatial=" + compact_list(d.spatial));
  if (d.gradient_lag)
    o.emplace_back(d.lag_correction ? "train.gradient_lag={steps: 1, correction: local}"
                                    : "train.gradient_lag=1");
  if (d.local_sgd_steps > 1)
    o.push_back("train.local_sgd={steps: " + std::to_string(d.local_sgd_steps) + "}");
  if (d.pipeline_stages > 1) {
    o.push_back("dist.pipeline.stages=" + std::to_string(d.pipeline_stages));
    o.push_back("dist.pipeline.micro_batches=" + std::to_string(d.micro_batches));
  }
  return o;
}

double allreduce_seconds(const Machine& m, double bytes, int ranks, int ranks_per_node) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const int r = std::clamp(ranks_per_node, 1, ranks);
  const int nodes = (ranks + r - 1) / r;
  const Link intra = m.node_link();
  double t = 0;
  if (r > 1)  // reduce-scatter and allgather within the node: a ring
    t += 2.0 * (r - 1) / r * bytes / (intra.gb_s * 1e9) + 2.0 * (r - 1) * intra.latency_us * 1e-6;
  if (nodes > 1)  // the node's share, across nodes over its injection bandwidth: a tree's hops
    t += 2.0 * (nodes - 1) / nodes * bytes / (m.inter_node.gb_s * 1e9) +
         2.0 * std::ceil(std::log2(nodes)) * m.inter_node.latency_us * 1e-6;
  return t;
}

namespace {

// The fastest loader measured on samples of `sample`'s shape; null when none was.
const MeasuredLoader* fastest_loader(const Machine& m, const Shape& sample) {
  const MeasuredLoader* best = nullptr;
  for (const MeasuredLoader& l : m.measured_loader)
    if (l.sample_shape == sample.to_vector() && (!best || l.samples_per_s > best->samples_per_s))
      best = &l;
  return best;
}

// A rate as the notes print it: "12.3".
std::string fixed_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

struct Placement {
  int nodes = 1, ranks_on_node = 1;
  double threads = 1;
};

Placement place(const Machine& m, int ranks) {
  Placement p;
  p.ranks_on_node = std::min(ranks, m.ranks_per_node);
  p.nodes = (ranks + m.ranks_per_node - 1) / m.ranks_per_node;
  p.threads = m.cores_per_node > 0 ? static_cast<double>(m.cores_per_node) / p.ranks_on_node : 1.0;
  return p;
}

// Gradient buckets as GradientSync forms them (first_bucket_mb, then bucket_mb, in the order
// backward finishes the layers), each with the time its last gradient is ready (from the start
// of backward), and the exchange run one bucket after the other on the communication thread.
struct Exchange {
  double total_s = 0;  // every bucket's allreduce
  double end_s = 0;    // when the last one ends, from the start of backward
};

Exchange simulate_buckets(const std::vector<double>& layer_bytes,
                          const std::vector<double>& layer_backward_s, const PlanOptions& o,
                          const std::function<double(double)>& allreduce) {
  Exchange e;
  double done = 0;  // backward's clock: when the layer just run finished
  double bucket = 0, bucket_ready = 0, limit = o.first_bucket_mb * 1e6;
  auto send = [&] {  // a bucket leaves when its last gradient is ready
    const double t = allreduce(bucket);
    e.end_s = std::max(e.end_s, bucket_ready) + t;
    e.total_s += t;
    bucket = 0;
    limit = o.bucket_mb * 1e6;
  };
  for (size_t i = layer_bytes.size(); i-- > 0;) {  // backward: the last layer first
    done += layer_backward_s[i];
    if (layer_bytes[i] <= 0) continue;
    if (bucket >= limit) send();  // full before this layer joins: GradientSync's rule
    bucket += layer_bytes[i];
    bucket_ready = done;
  }
  if (bucket > 0) send();
  return e;
}

// The largest block's share of `extent` rows split `parts` ways (numpy.array_split's first part).
double largest_share(int64_t extent, int parts) {
  return static_cast<double>(block_range(extent, parts, 0).size()) / static_cast<double>(extent);
}

// What splitting each layer costs and saves: its compute share, and the halo it exchanges.
struct SpatialCosts {
  std::vector<double> share;  // per layer: its largest rank's share of the layer's work
  double halo_bytes = 0;      // per sample, forward + backward, the largest rank's
  int halo_messages = 0;
  int group_reductions = 0;   // batch norm's statistics and gradient sums, per step
  double gathered_bytes = 0;  // per sample: a split output gathered whole on every rank
  double sample_share = 1;    // the largest block of the sample
  double divided_bytes = 0;   // a dense head's weight divided among the group (all of it)
  std::string gathered_at;    // the first layer that runs whole again ("" : none)
};

// Spatial axis `axis` of a per-sample shape [c, spatial...].
int64_t extent(const Shape& per_sample, size_t axis) {
  return per_sample[static_cast<int>(axis) + 1];
}

// A layer's halo along every split axis, on the group rank that receives the most.
void add_halo(const LayerFacts& l, const std::vector<int>& parts, SpatialCosts& c) {
  const int64_t channels = l.in[0];
  for (size_t a = 0; a < l.windows.size() && a < parts.size(); ++a) {
    if (parts[a] <= 1) continue;
    double cross = static_cast<double>(channels);
    for (size_t b = 0; b < parts.size(); ++b)
      if (b != a) cross *= static_cast<double>(block_range(extent(l.in, b), parts[b], 0).size());
    int64_t most = 0;
    int messages = 0;
    for (int i = 0; i < parts[a]; ++i) {
      const AxisPlan p = plan_axis(l.windows[a], parts[a], i, l.name, "axis " + std::to_string(a));
      const int64_t rows = p.from_lower.size() + p.from_upper.size();
      if (rows >= most) {
        most = rows;
        messages = !p.from_lower.empty() + !p.from_upper.empty();
      }
    }
    // Forward, then backward twice: the halo's gradient returned, and the window gathered
    // again for the weight gradient (docs/distributed.md, "Split layers").
    c.halo_bytes += 3.0 * static_cast<double>(most) * cross * sizeof(float);
    c.halo_messages += 3 * messages;
  }
}

SpatialCosts spatial_costs(const ModelFacts& model, const std::vector<int>& parts) {
  SpatialCosts c;
  c.share.assign(model.layers.size(), 1.0);
  for (size_t a = 0; a < parts.size(); ++a)
    c.sample_share *= largest_share(model.sample[static_cast<int>(a)], parts[a]);
  const auto spatial_rank = static_cast<int>(parts.size()) + 1;  // [c, spatial...]
  double last_split_out = 0;
  bool any_split = false;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerFacts& l = model.layers[i];
    const bool feeds_head =
        l.kind == "flatten" && i + 1 < model.layers.size() && model.layers[i + 1].dense_on_features;
    if (feeds_head || l.dense_on_features) {  // the block's features, the head's columns
      c.share[i] = c.sample_share;
      if (l.dense_on_features) {
        c.divided_bytes += static_cast<double>(l.trainable_bytes);
        last_split_out = 0;  // nothing is gathered: the parts' products are summed
        break;
      }
      continue;
    }
    if (l.out.rank() != spatial_rank) {  // the loss or a head reads the whole tensor
      c.gathered_at = l.name;
      break;
    }
    if (!l.windows.empty()) {
      try {
        add_halo(l, parts, c);
      } catch (const Error&) {
        if (!any_split) throw;   // the samples themselves cannot be split so
        c.gathered_at = l.name;  // too small for the decomposition: gathered from here
        break;
      }
    }
    double share = 1;
    for (size_t a = 0; a < parts.size(); ++a) share *= largest_share(extent(l.out, a), parts[a]);
    c.share[i] = share;
    c.group_reductions += l.batch_norm ? 2 : 0;
    last_split_out = static_cast<double>(l.out.numel()) * sizeof(float);
    any_split = true;
  }
  c.gathered_bytes = c.gathered_at.empty() ? 0 : last_split_out;
  return c;
}

// A pipeline's stages: contiguous layers, cut where the slowest stage is fastest (the cut
// crest bench pipeline makes: balanced_stage_starts); each stage's end.
std::vector<size_t> stage_ends(const std::vector<double>& layer_s, int stages) {
  std::vector<size_t> ends = balanced_stage_starts(layer_s, stages);
  ends.push_back(layer_s.size());
  return ends;
}

struct Totals {
  double forward = 0, backward = 0;
};

Totals totals(const ComputeTimes& t, const std::vector<double>& share, double batch) {
  Totals s;
  for (size_t i = 0; i < t.layers.size(); ++i) {
    s.forward += t.layers[i].forward * share[i] * batch;
    s.backward += t.layers[i].backward * share[i] * batch;
  }
  return s;
}

// Seconds a spatial group of `group` ranks spends per step of `batch` samples on its halo
// exchanges, its batch norms' and heads' group reductions and the gathers where the split ends.
double halo_seconds(const Machine& m, const SpatialCosts& sc, int group, const Placement& place,
                    double batch) {
  const Link link = group <= place.ranks_on_node ? m.node_link() : m.inter_node;
  double s = sc.halo_bytes * batch / (link.gb_s * 1e9) + sc.halo_messages * link.latency_us * 1e-6;
  for (int i = 0; i < sc.group_reductions; ++i)
    s += allreduce_seconds(m, 1024, group, std::min(group, place.ranks_on_node));
  return s + sc.gathered_bytes * batch * (group - 1) / group / (link.gb_s * 1e9);
}

// K stages over M micro-batches (1F1B). Under a spatial split each stage is a group of S ranks
// holding blocks: its layers' shares of the work, the blocks sent at a cut, its halo exchanges
// (the model's, in the slowest stage's proportion) every slot, its gradients averaged over
// S x D ranks (a divided head's part alone).
// The slowest stage's time per sample in each of the schedule's M + K - 1 slots, summed. Slot s
// has min(s + 1, M + K - 1 - s, K, M) of the K stages busy; on a CPU node the busy ranks share
// the cores the idle ones leave (up to the threads each runs), beside fewer neighbours: the layer
// times are those of that many ranks side by side (crest bench train --independent), the cut
// the one `ends` made at the full node's.
double pipeline_slots_seconds(const ModelFacts& model, const Machine& m, const Placement& place,
                              int threads_per_rank, const std::vector<size_t>& ends,
                              const std::vector<double>& share, const Prediction& p) {
  const int stages = p.d.pipeline_stages, micro = p.d.micro_batches;
  std::map<int, double> slowest_by_busy;  // busy stages -> the slowest stage's time
  auto slowest = [&](int busy) {
    if (const auto it = slowest_by_busy.find(busy); it != slowest_by_busy.end()) return it->second;
    const double busy_ranks = static_cast<double>(place.ranks_on_node) * busy / stages;
    RankShare r{.threads = place.threads, .node_ranks = place.ranks_on_node};
    if (m.cores_per_node > 0) {
      r.threads = std::max(place.threads,
                           std::min<double>(threads_per_rank, m.cores_per_node / busy_ranks));
      r.node_ranks = std::max(1, static_cast<int>(std::lround(busy_ranks)));
    }
    const ComputeTimes t = compute_times(model, m, r, p.d.spatial);
    double worst = 0;
    size_t begin = 0;
    for (const size_t end : ends) {
      double stage = 0;
      for (size_t i = begin; i < end; ++i)
        stage += (t.layers[i].forward + t.layers[i].backward) * share[i];
      worst = std::max(worst, stage);
      begin = end;
    }
    return slowest_by_busy[busy] = worst;
  };
  double total = 0;
  for (int slot = 0, slots = micro + stages - 1; slot < slots; ++slot)
    total += slowest(std::min({slot + 1, slots - slot, stages, micro}));
  return total;
}

// The lag's local correction: one pass streaming the gradients six times where the plain lag's
// copies (not priced) stream them four, priced as a third of the update (a momentum-SGD update
// and its finiteness check stream them six times; docs/scaling.md).
double lag_correction_seconds(const Decomposition& d, double update_s) {
  return d.lag_correction ? update_s / 3.0 : 0.0;
}

void predict_pipeline(const ModelFacts& model, const Machine& m, const ComputeTimes& times,
                      const Placement& place, double batch, const SpatialCosts& sc, Prediction& p) {
  const int stages = p.d.pipeline_stages, micro = p.d.micro_batches, group = p.d.spatial_ranks();
  const double per_micro = batch / micro;
  const std::vector<double> ones(model.layers.size(), 1.0);
  const std::vector<double>& share = times.split_measured ? ones : sc.share;
  std::vector<double> layer_s;
  for (size_t i = 0; i < times.layers.size(); ++i)
    layer_s.push_back((times.layers[i].forward + times.layers[i].backward) * share[i]);
  const std::vector<size_t> ends = stage_ends(layer_s, stages);
  double slowest = 0, stage_bytes = 0, boundary = 0, stage_act = 0, all_act = 0, all_s = 0;
  for (const LayerFacts& l : model.layers) all_act += static_cast<double>(l.out.numel());
  size_t begin = 0;
  for (size_t k = 0; k < ends.size(); ++k) {
    double s = 0, bytes = 0, act = 0;
    for (size_t i = begin; i < ends[k]; ++i) {
      const LayerFacts& l = model.layers[i];
      s += layer_s[i];
      bytes += static_cast<double>(l.trainable_bytes) *
               (l.dense_on_features && group > 1 ? sc.share[i] : 1.0);
      act += static_cast<double>(l.out.numel()) * sc.share[i];
    }
    if (k + 1 < ends.size()) {
      const size_t last = ends[k] - 1;
      boundary = std::max(boundary, static_cast<double>(model.layers[last].out.numel()) *
                                        sc.share[last] * sizeof(float));
    }
    slowest = std::max(slowest, s);
    all_s += s;
    stage_bytes = std::max(stage_bytes, bytes);
    stage_act = std::max(stage_act, act);
    begin = ends[k];
  }
  const Link link = stages * group <= place.ranks_on_node ? m.node_link() : m.inter_node;
  const double send = boundary * per_micro / (link.gb_s * 1e9) + link.latency_us * 1e-6;
  const int slots = micro + stages - 1;
  p.pipeline_s = slots * 2 * send;
  if (group > 1 && !times.split_measured && all_s > 0)
    p.halo_s = slots * halo_seconds(m, sc, group, place, per_micro) * slowest / all_s;
  p.bubble_fraction = static_cast<double>(stages - 1) / slots;
  p.compute_s =
      pipeline_slots_seconds(model, m, place, p.threads_per_rank, ends, share, p) * per_micro;
  p.update_s =
      times.update_s * stage_bytes / std::max(1.0, static_cast<double>(model.trainable_bytes));
  p.compute_s += p.update_s + lag_correction_seconds(p.d, p.update_s);
  const int d = p.d.data_parallel();
  p.gradient_exchange_s =
      allreduce_seconds(m, stage_bytes, d * group, std::max(1, place.ranks_on_node / stages));
  // The lag's exchange travels during the next batch's schedule (hidden up to its length).
  p.exposed_exchange_s =
      p.d.gradient_lag ? std::max(0.0, p.gradient_exchange_s - p.compute_s) : p.gradient_exchange_s;
  const double state = static_cast<double>(model.optimizer_state_bytes) /
                       std::max(1.0, static_cast<double>(model.trainable_bytes));
  const int in_flight = std::min(micro, stages);  // 1F1B: the first stage holds K micro-batches
  // The stage's two more gradient copies (and the correction's previous gradient).
  const double lag = (p.d.gradient_lag ? static_cast<double>(model.gradient_lag_bytes) /
                                             static_cast<double>(model.trainable_bytes)
                                       : 0.0) +
                     (p.d.lag_correction ? 1.0 : 0.0);
  // Every rank holds its stage's alone: checkpoints stream the stages' tensors to rank 0
  // (docs/distributed.md "Pipeline stages"); with M > 1 also the micro-batches' gradient sum.
  const double sum = micro > 1 ? 1.0 : 0.0;
  p.memory_bytes =
      stage_bytes * (2 + state + lag + sum) +
      static_cast<double>(model.arena_bytes(per_micro)) * stage_act / all_act * in_flight;
}

// A step ends when the slowest of the ranks exchanging in it does: with each rank's step time
// varying by `step_jitter` (standard deviation / mean) independently, it is late by the expected
// largest of `ranks` normal draws. Slack lets the draws of several steps average out first: the
// lag's exchange waits for the previous step (2 steps), local SGD's averaging for a window of H
// (docs/scaling.md, "Stragglers").
double straggler_seconds(const Machine& m, const Decomposition& d, double compute_s) {
  if (m.step_jitter <= 0 || d.ranks < 2) return 0;
  const int slack = d.local_sgd_steps > 1 ? d.local_sgd_steps : d.gradient_lag ? 2 : 1;
  return m.step_jitter * compute_s * expected_max_of_normals(d.ranks) /
         std::sqrt(static_cast<double>(slack));
}

}  // namespace

double expected_max_of_normals(int n) {
  if (n < 2) return 0;
  // Newton's method on the upper tail, 0.5 erfc(z / sqrt 2) = q, from the asymptote sqrt(2 ln n):
  // the tail is convex there, so the steps fall monotonically onto the root.
  const double q = 0.625 / (n + 0.25);
  double z = std::sqrt(2 * std::log(static_cast<double>(n)));
  for (int i = 0; i < 50; ++i) {
    const double tail = 0.5 * std::erfc(z / std::sqrt(2.0));
    const double density = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
    const double step = (tail - q) / density;
    z += step;
    if (std::abs(step) < 1e-12) break;
  }
  return z;
}

Prediction predict(const ModelFacts& model, const Machine& m, const Decomposition& d,
                   const PlanOptions& o) {
  Prediction p;
  p.d = d;
  const int replicas = d.data_parallel();
  if (o.global_batch % replicas != 0)
    throw_usage("a global batch of " + std::to_string(o.global_batch) + " does not divide among " +
                std::to_string(replicas) + " model replicas");
  p.batch_per_replica = o.global_batch / replicas;
  const auto batch = static_cast<double>(p.batch_per_replica);
  const Placement place = crest::place(m, d.ranks);
  p.threads_per_rank = std::max(1, static_cast<int>(std::floor(place.threads)));
  const ComputeTimes times = compute_times(
      model, m, {.threads = place.threads, .node_ranks = place.ranks_on_node}, d.spatial);
  p.source = times.source;
  p.notes = times.notes;
  const double state_ratio = static_cast<double>(model.optimizer_state_bytes) /
                             std::max(1.0, static_cast<double>(model.trainable_bytes));
  auto allreduce = [&](double bytes) {
    return allreduce_seconds(m, bytes, d.ranks, place.ranks_on_node);
  };
  // One rank alone with ranks-th of the global batch, on its cores with no other rank beside
  // it: the efficiency's reference, so ranks slowing each other down count as lost scaling.
  const ComputeTimes alone = compute_times(model, m, {.threads = place.threads, .node_ranks = 1});
  const std::vector<double> whole(model.layers.size(), 1.0);
  const double per_rank = static_cast<double>(o.global_batch) / d.ranks;
  const Totals ref = totals(alone, whole, per_rank);
  const double reference_step = ref.forward + ref.backward + alone.update_s;
  SpatialCosts sc;
  sc.share = whole;
  if (d.spatial_ranks() > 1) sc = spatial_costs(model, d.spatial);
  if (!sc.gathered_at.empty() && !times.split_measured)
    p.notes.push_back("the split ends before " + sc.gathered_at +
                      ": from there every rank of a group runs the whole layer");
  if (d.pipeline_stages > 1) {
    predict_pipeline(model, m, times, place, batch, sc, p);
  } else {
    // A measured split: its layers' times are already a block's, halo exchanges included.
    const std::vector<double>& share = times.split_measured ? whole : sc.share;
    const Totals t = totals(times, share, batch);
    p.update_s = times.update_s;
    p.compute_s = t.forward + t.backward + p.update_s + lag_correction_seconds(d, p.update_s);
    const double grad_scale = o.gradient_element_bytes / 4.0;
    std::vector<double> bytes, backward_s;
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const LayerFacts& l = model.layers[i];
      const double part = l.dense_on_features && d.spatial_ranks() > 1 ? sc.share[i] : 1.0;
      bytes.push_back(static_cast<double>(l.trainable_bytes) * grad_scale * part);
      backward_s.push_back(times.layers[i].backward * share[i] * batch);
    }
    const Exchange e = simulate_buckets(bytes, backward_s, o, allreduce);
    p.gradient_exchange_s = e.total_s;
    if (d.local_sgd_steps > 1) {  // weights, optimizer state and non-trained state, every H steps
      const double averaged = static_cast<double>(model.parameter_bytes) +
                              static_cast<double>(model.optimizer_state_bytes);
      p.gradient_exchange_s = allreduce(averaged) / d.local_sgd_steps;
      // Under dynamic loss scaling the ranks also agree on overflows every step (two flags).
      if (o.dynamic_loss_scaling) p.gradient_exchange_s += allreduce(16);
      p.exposed_exchange_s = p.gradient_exchange_s;
    } else if (d.gradient_lag) {  // overlaps the update and the next step's forward and backward
      p.exposed_exchange_s = std::max(0.0, e.total_s - p.compute_s);
    } else {
      p.exposed_exchange_s = std::max(0.0, e.end_s - t.backward);
    }
    if (d.spatial_ranks() > 1 && !times.split_measured)
      p.halo_s = halo_seconds(m, sc, d.spatial_ranks(), place, batch);
    p.memory_bytes = static_cast<double>(model.parameter_bytes) +
                     static_cast<double>(model.trainable_bytes) * (1 + state_ratio) +
                     (d.gradient_lag ? static_cast<double>(model.gradient_lag_bytes) : 0.0) +
                     (d.lag_correction ? static_cast<double>(model.trainable_bytes) : 0.0) +
                     static_cast<double>(model.arena_bytes(batch)) * sc.sample_share -
                     sc.divided_bytes * (1 - sc.sample_share) * (2 + state_ratio);
  }
  p.straggler_s = straggler_seconds(m, d, p.compute_s);
  if (p.straggler_s > 0)
    p.notes.push_back("the slowest of " + std::to_string(d.ranks) + " ranks adds " +
                      fixed_text(100 * p.straggler_s / p.compute_s) +
                      " % to the compute (compute.step_jitter)");
  p.step_s = p.compute_s + p.straggler_s + p.exposed_exchange_s + p.halo_s + p.pipeline_s;
  // Reading: every sample once per step, spread over the nodes; the loader reads ahead, so
  // reading limits the step only when it is slower than everything else.
  const double node_bytes =
      static_cast<double>(o.global_batch) * static_cast<double>(model.sample_bytes) / place.nodes;
  const double supply = o.staged ? m.node_local_gb_s : m.shared_fs_gb_s / place.nodes;
  if (supply > 0) {
    p.io_s = node_bytes / (supply * 1e9);
    if (p.io_s > p.step_s) {
      p.notes.emplace_back(std::string("reading limits the step: ") +
                           (o.staged ? "node-local storage" : "the shared file system") +
                           " delivers less than the step needs");
      p.step_s = p.io_s;
    }
  }
  // Decoding: a rank's loader reads, inflates and decodes its batch at the best rate crest bench
  // loader measured for these samples (calibration), concurrently with the step.
  if (const MeasuredLoader* l = fastest_loader(m, model.sample)) {
    p.loader_s = static_cast<double>(p.batch_per_replica) / l->samples_per_s;
    if (p.loader_s > p.step_s) {
      p.notes.emplace_back("reading limits the step: the loader decodes " +
                           fixed_text(l->samples_per_s) + " " + l->format +
                           " samples/s per rank (crest bench loader, " +
                           std::to_string(l->threads) + " threads)");
      p.step_s = p.loader_s;
    }
  }
  p.io_gb_s_per_node = node_bytes / p.step_s / 1e9;
  p.samples_per_s = static_cast<double>(o.global_batch) / p.step_s;
  p.efficiency = reference_step / p.step_s;
  if (m.memory_gb_per_rank > 0 && p.memory_bytes > m.memory_gb_per_rank * 1e9) {
    p.fits = false;
    p.notes.emplace_back("needs more memory per rank than the machine's memory_gb_per_rank");
  }
  const std::string& caution = d.lag_correction ? model.corrected_lag_caution : model.lag_caution;
  if (d.gradient_lag && !caution.empty()) {
    p.cautioned = true;
    p.notes.push_back(caution);
  }
  return p;
}

namespace {

// Every way to write `n` as an ordered product of one factor per spatial axis of `sample`
// (channels last), each at most its axis' extent: an odometer over the divisors of `n`.
std::vector<std::vector<int>> factorizations(int n, const Shape& sample) {
  std::vector<int> divisors;
  for (int f = 1; f <= n; ++f)
    if (n % f == 0) divisors.push_back(f);
  const auto axes = static_cast<size_t>(sample.rank() - 1);
  std::vector<size_t> digit(axes, 0);
  std::vector<std::vector<int>> out;
  while (true) {
    std::vector<int> parts(axes);
    int64_t product = 1;
    bool fits = true;
    for (size_t a = 0; a < axes; ++a) {
      parts[a] = divisors[digit[a]];
      product *= parts[a];
      fits = fits && parts[a] <= sample[static_cast<int>(a)];
    }
    if (fits && product == n) out.push_back(parts);
    size_t a = axes;  // the next combination: the last axis turns fastest
    while (a > 0 && ++digit[a - 1] == divisors.size()) digit[--a] = 0;
    if (a == 0) return out;
  }
}

}  // namespace

std::vector<Decomposition> candidate_decompositions(const ModelFacts& model, int ranks,
                                                    const PlanOptions& o, int local_sgd_steps) {
  std::vector<Decomposition> c;
  const auto divides = [&](int replicas) { return o.global_batch % replicas == 0; };
  if (divides(ranks)) {
    c.push_back({.ranks = ranks});
    if (ranks > 1) c.push_back({.ranks = ranks, .gradient_lag = true});
    if (ranks > 1) c.push_back({.ranks = ranks, .gradient_lag = true, .lag_correction = true});
    if (ranks > 1 && local_sgd_steps > 1)
      c.push_back({.ranks = ranks, .local_sgd_steps = local_sgd_steps});
  }
  for (int s = 2; s <= ranks && s <= 64; ++s) {
    if (ranks % s != 0 || !divides(ranks / s)) continue;
    for (auto& parts : factorizations(s, model.sample))
      c.push_back({.ranks = ranks, .spatial = parts});
  }
  for (int k = 2; k <= ranks && k <= 16; k *= 2) {
    if (ranks % k != 0 || !divides(ranks / k)) continue;
    if (static_cast<size_t>(k) > model.layers.size() / 2) break;
    const int64_t batch = o.global_batch / (ranks / k);
    for (int mb : {k, 2 * k, 4 * k}) {
      if (batch % mb != 0) continue;
      c.push_back({.ranks = ranks, .pipeline_stages = k, .micro_batches = mb});
      // With replicas to average over, the lag hides their exchange behind the next schedule.
      if (ranks > k) {
        c.push_back(
            {.ranks = ranks, .pipeline_stages = k, .micro_batches = mb, .gradient_lag = true});
        c.push_back({.ranks = ranks,
                     .pipeline_stages = k,
                     .micro_batches = mb,
                     .gradient_lag = true,
                     .lag_correction = true});
      }
    }
    // Stages split spatially (groups of S = 2, 4 or 8 ranks, as a node holds them): at the most
    // micro-batches (4K, 2K or K) the replica's batch allows, the smallest bubble.
    for (int s = 2; k * s <= ranks && s <= 8; s *= 2) {
      if (ranks % (k * s) != 0 || !divides(ranks / (k * s))) continue;
      const int64_t replica_batch = o.global_batch / (ranks / (k * s));
      for (int mb : {4 * k, 2 * k, k}) {
        if (replica_batch % mb != 0) continue;
        for (auto& parts : factorizations(s, model.sample))
          c.push_back(
              {.ranks = ranks, .spatial = parts, .pipeline_stages = k, .micro_batches = mb});
        break;
      }
    }
  }
  return c;
}

std::vector<Prediction> rank_predictions(std::vector<Prediction> p) {
  std::stable_sort(p.begin(), p.end(), [](const Prediction& a, const Prediction& b) {
    const bool ga = a.runnable && a.fits, gb = b.runnable && b.fits;
    if (ga != gb) return ga;
    return a.samples_per_s > b.samples_per_s;
  });
  return p;
}

namespace {

// How much a decomposition changes training: 0 the same updates as one process.
int departure(const Decomposition& d) {
  if (d.local_sgd_steps > 1) return 3;
  if (d.gradient_lag) return 2;
  return d.spatial_ranks() > 1 ? 1 : 0;
}

}  // namespace

size_t recommended_index(const std::vector<Prediction>& ranked, double margin) {
  const auto eligible = [](const Prediction& p) { return p.runnable && p.fits && !p.cautioned; };
  double fastest = 0;
  for (const Prediction& p : ranked)
    if (eligible(p)) fastest = std::max(fastest, p.samples_per_s);
  size_t best = ranked.size();
  for (size_t i = 0; i < ranked.size(); ++i) {
    const Prediction& p = ranked[i];
    if (!eligible(p) || p.samples_per_s < (1 - margin) * fastest) continue;
    if (best == ranked.size() || departure(p.d) < departure(ranked[best].d) ||
        (departure(p.d) == departure(ranked[best].d) &&
         p.samples_per_s > ranked[best].samples_per_s))
      best = i;
  }
  return best;
}

}  // namespace crest
