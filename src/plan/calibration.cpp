// Folding benchmark JSON lines into a machine's measurements.
#include "crest/plan/calibration.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "crest/core/error.hpp"

namespace crest {
namespace {

struct Line {
  Line(nlohmann::json object, int line_number) : j(std::move(object)), number(line_number) {}
  nlohmann::json j;
  int number;
};

double number_of(const Line& l, const char* key, const std::string& source) {
  const auto it = l.j.find(key);
  if (it == l.j.end() || !it->is_number())
    throw_input(source + ":" + std::to_string(l.number) +
                ": a crest bench line without a numeric '" + key + "'");
  return it->get<double>();
}

std::string string_of(const Line& l, const char* key, const std::string& source) {
  const auto it = l.j.find(key);
  if (it == l.j.end() || !it->is_string())
    throw_input(source + ":" + std::to_string(l.number) + ": a crest bench line without '" + key +
                "'");
  return it->get<std::string>();
}

// A bench loader line's end-to-end figures.
MeasuredLoader loader_of(const Line& l, const std::string& source) {
  MeasuredLoader m;
  m.format = string_of(l, "format", source);
  const auto shape = l.j.find("sample_shape");
  if (shape == l.j.end() || !shape->is_array() || shape->empty())
    throw_input(source + ":" + std::to_string(l.number) +
                ": a crest bench loader line without its 'sample_shape'");
  for (const auto& e : *shape) m.sample_shape.push_back(e.get<int64_t>());
  m.threads = static_cast<int>(number_of(l, "threads", source));
  m.samples_per_s = number_of(l, "samples_per_s", source);
  m.payload_bytes_per_sample = number_of(l, "payload_bytes_per_sample", source);
  return m;
}

// Keeps `m`, or the faster of it and a measurement of the same format, shape and threads: a
// shared machine's noise only ever slows a run down.
void keep_faster(std::vector<MeasuredLoader>& kept, MeasuredLoader m) {
  const auto old = std::find_if(kept.begin(), kept.end(), [&](const MeasuredLoader& o) {
    return o.format == m.format && o.sample_shape == m.sample_shape && o.threads == m.threads;
  });
  if (old == kept.end())
    kept.push_back(std::move(m));
  else if (m.samples_per_s > old->samples_per_s)
    *old = std::move(m);
}

// A bench train line and the --profile lines after it.
MeasuredTraining training_of(const Line& head, const std::vector<Line>& layers,
                             const std::string& source) {
  MeasuredTraining t;
  t.model = string_of(head, "model", source);
  t.backend = string_of(head, "backend", source);
  t.precision = string_of(head, "precision", source);
  if (head.j.contains("spatial")) {  // "2,1,1"
    std::string parts = string_of(head, "spatial", source);
    for (size_t at = 0; at <= parts.size();) {
      const size_t comma = std::min(parts.find(',', at), parts.size());
      const std::string part = parts.substr(at, comma - at);
      if (part.empty() || part.size() > 6 ||
          part.find_first_not_of("0123456789") != std::string::npos)
        throw_input(source + ":" + std::to_string(head.number) + ": spatial '" + parts +
                    "' is not parts per axis (\"2,1,1\")");
      t.spatial.push_back(std::stoi(part));
      at = comma + 1;
    }
  }
  t.threads = static_cast<int>(number_of(head, "threads", source));
  if (head.j.value("independent", false)) {
    t.node_ranks = static_cast<int>(number_of(head, "node_ranks", source));
    if (t.node_ranks < 1 || t.node_ranks != head.j.value("ranks", 0))
      throw_input(source + ":" + std::to_string(head.number) +
                  ": an independent bench train line must have run on one node (node_ranks "
                  "equal to ranks): ranks on several nodes do not share one");
  }
  t.batch = static_cast<int64_t>(number_of(head, "batch", source));
  t.step_s = number_of(head, "step_s_min", source);
  t.update_s = number_of(head, "update_s_min", source);
  t.trainable_bytes = static_cast<size_t>(number_of(head, "trainable_bytes", source));
  const auto b = static_cast<double>(t.batch);
  double profiled = 0;
  for (const Line& l : layers) {
    t.layers.push_back({string_of(l, "layer", source), number_of(l, "forward_ms", source) / 1e3 / b,
                        number_of(l, "backward_ms", source) / 1e3 / b,
                        number_of(l, "forward_flop", source) / b});
    profiled += (t.layers.back().forward_s + t.layers.back().backward_s) * b;
  }
  // The profile is the mean of the timed steps, with a clock read around every op; the best
  // step is what a run sustains. The layers keep their shares of the best step.
  if (profiled > 0 && t.step_s > t.update_s) {
    const double scale = (t.step_s - t.update_s) / profiled;
    for (MeasuredLayer& l : t.layers) {
      l.forward_s *= scale;
      l.backward_s *= scale;
    }
  }
  return t;
}

bool same_run(const MeasuredTraining& a, const MeasuredTraining& b) {
  return a.model == b.model && a.backend == b.backend && a.precision == b.precision &&
         a.spatial == b.spatial && a.threads == b.threads && a.node_ranks == b.node_ranks &&
         a.batch == b.batch;
}

// Least squares of t = a + s * bytes, each point weighted by 1 / t^2 (relative errors, so the
// small messages fix the latency as the large ones fix the bandwidth), then the ring model's
// latency and bandwidth.
MeasuredAllreduce fit_allreduce(int ranks, const std::vector<std::pair<double, double>>& points,
                                const std::string& source) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    const double w = 1 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
  const double intercept = std::max(0.0, (sy - slope * sx) / sw);
  if (!(slope > 0))
    throw_input(source + ": the allreduce times on " + std::to_string(ranks) +
                " ranks do not grow with the message size: no bandwidth to fit (measure sizes "
                "further apart, e.g. --sizes 1K,1M,64M)");
  MeasuredAllreduce m;
  m.ranks = ranks;
  m.sizes = static_cast<int>(points.size());
  m.link.gb_s = 2.0 * (ranks - 1) / ranks / slope / 1e9;
  m.link.latency_us = intercept / (2.0 * (ranks - 1)) * 1e6;
  return m;
}

// Allreduce points by the memory they were reduced in ("host": MPI; "device": a device backend's
// collectives, NCCL, where `crest bench allreduce`'s "memory" names that backend; host where a
// line has none) and ranks: (bytes, s).
using AllreducePoints =
    std::map<std::pair<std::string, int>, std::vector<std::pair<double, double>>>;

// The memory the machine's gradient exchange reduces in: on a node of devices (cores_per_node 0)
// the devices' (NCCL), on a CPU node the host's (MPI). The two are never fitted together (their
// latency and bandwidth differ by orders of magnitude); only an input with none of the machine's
// kind has the other's fitted.
std::string exchange_memory(const Machine& m, const AllreducePoints& points) {
  std::string wanted = m.cores_per_node == 0 ? "device" : "host";
  for (const auto& [key, p] : points)
    if (key.first == wanted) return wanted;
  return wanted == "device" ? "host" : "device";
}

}  // namespace

CalibrationSummary calibrate(Machine& machine, std::istream& lines, const std::string& source) {
  CalibrationSummary s;
  std::vector<Line> parsed;
  std::string text;
  for (int number = 1; std::getline(lines, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      throw_input(source + ":" + std::to_string(number) +
                  ": not a JSON line (crest bench prints one JSON object per line)");
    }
    if (!j.is_object())
      throw_input(source + ":" + std::to_string(number) + ": expected a JSON object");
    parsed.emplace_back(std::move(j), number);
  }
  AllreducePoints allreduce;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Line& l = parsed[i];
    const std::string bench = l.j.value("bench", "");
    // One rank, independent ranks (each computing alone beside the others), or one spatial
    // group (its layers' times are a block's); a data-parallel run's times include the
    // exchange, which the model adds itself.
    const bool one_group = l.j.value("ranks", 1) == 1 || l.j.value("independent", false) ||
                           (l.j.contains("spatial") && l.j.value("data_parallel", 0) == 1);
    if (bench == "train" && one_group) {
      std::vector<Line> layers;
      while (i + 1 < parsed.size() && parsed[i + 1].j.contains("layer"))
        layers.push_back(parsed[++i]);
      if (layers.empty())
        throw_input(source + ":" + std::to_string(l.number) +
                    ": a bench train line without its per-layer lines: run crest bench train "
                    "with --profile");
      MeasuredTraining t = training_of(l, layers, source);
      // Of two measurements of the same run the faster stays: a shared machine's noise only
      // ever slows a run down.
      auto& kept = machine.measured_training;
      const auto old = std::find_if(kept.begin(), kept.end(),
                                    [&](const MeasuredTraining& o) { return same_run(o, t); });
      if (old == kept.end())
        kept.push_back(std::move(t));
      else if (t.step_s < old->step_s)
        *old = std::move(t);
      ++s.trainings;
    } else if (bench == "loader" && l.j.value("ranks", 1) == 1 && !l.j.contains("group_rank")) {
      keep_faster(machine.measured_loader, loader_of(l, source));
      ++s.loaders;
    } else if (bench == "allreduce" && l.j.value("ranks", 1) > 1) {
      const auto ranks = static_cast<int>(number_of(l, "ranks", source));
      const bool device = l.j.value("memory", "host") != "host";
      allreduce[{device ? "device" : "host", ranks}].emplace_back(
          number_of(l, "bytes", source), number_of(l, "time_us", source) / 1e6);
    } else {
      ++s.ignored_lines;
    }
  }
  // The fit of the most ranks that still share one node: what a node's ranks see.
  const std::string memory = exchange_memory(machine, allreduce);
  for (const auto& [key, points] : allreduce) {
    const int ranks = key.second;
    if (key.first != memory || ranks > machine.ranks_per_node || points.size() < 2) {
      s.ignored_lines += static_cast<int>(points.size());
      continue;
    }
    machine.measured_allreduce = fit_allreduce(ranks, points, source);
    ++s.allreduce_fits;
  }
  return s;
}

}  // namespace crest
