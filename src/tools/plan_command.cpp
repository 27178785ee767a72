// crest plan --config FILE --machine MACHINE.yaml [key=value ...] [--ranks 1,2,4]
//            [--global-batch N] [--local-sgd-steps H] [--format table|json]
//   predicts every decomposition of each rank count (docs/scaling.md) and recommends one.
// crest plan calibrate --machine MACHINE.yaml BENCH.jsonl... ("-": stdin)
//   folds crest bench train --profile and crest bench allreduce lines into the machine's
//   measurements (MACHINE.measured.yaml).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/core/units.hpp"
#include "crest/plan/calibration.hpp"
#include "crest/plan/machine.hpp"
#include "crest/plan/model_facts.hpp"
#include "crest/plan/scaling_model.hpp"
#include "crest/train/config.hpp"

namespace crest::tools {
namespace {

struct PlanArgs {
  std::string config, machine, format = "table";
  std::vector<std::string> overrides;
  std::vector<int> ranks;
  int64_t global_batch = 0;  // 0: data.batch_size per rank
  int local_sgd_steps = 4;
};

const char* source_name(ComputeSource s) {
  switch (s) {
    case ComputeSource::measured:
      return "measured";
    case ComputeSource::measured_rate:
      return "measured rate";
    case ComputeSource::given_rate:
      break;
  }
  return "given rate";
}

// Powers of two up to the machine's ranks, and the machine's ranks itself.
std::vector<int> default_ranks(const Machine& m) {
  const long most = static_cast<long>(m.nodes) * m.ranks_per_node;
  std::vector<int> r;
  for (long n = 1; n < most; n *= 2) r.push_back(static_cast<int>(n));
  r.push_back(static_cast<int>(most));
  return r;
}

PlanOptions plan_options(const Config& c, int64_t global_batch) {
  PlanOptions o;
  o.global_batch = global_batch;
  o.bucket_mb = c.dist.bucket_mb;
  o.first_bucket_mb = c.dist.first_bucket_mb;
  o.gradient_element_bytes = c.dist.compress == "none" ? 4 : 2;
  o.staged = !c.data.stage_dir.empty();
  o.dynamic_loss_scaling = c.train.loss_scaling != LossScaling::off;
  return o;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

nlohmann::json prediction_json(const Prediction& p, const Machine& m, const ModelFacts& f) {
  nlohmann::json j;
  j["plan"] = f.model;
  j["machine"] = m.name;
  j["ranks"] = p.d.ranks;
  j["decomposition"] = p.d.name();
  j["data_parallel"] = p.d.data_parallel();
  j["global_batch"] = p.batch_per_replica * p.d.data_parallel();
  j["batch_per_replica"] = p.batch_per_replica;
  j["threads_per_rank"] = p.threads_per_rank;
  j["step_s"] = p.step_s;
  j["compute_s"] = p.compute_s;
  j["update_s"] = p.update_s;
  j["gradient_exchange_s"] = p.gradient_exchange_s;
  j["exposed_exchange_s"] = p.exposed_exchange_s;
  j["hidden_fraction"] = p.hidden_fraction();
  j["halo_s"] = p.halo_s;
  j["pipeline_send_s"] = p.pipeline_s;
  j["straggler_s"] = p.straggler_s;
  j["bubble_fraction"] = p.bubble_fraction;
  j["io_s"] = p.io_s;
  j["loader_s"] = p.loader_s;
  j["io_gb_s_per_node"] = p.io_gb_s_per_node;
  j["samples_per_s"] = p.samples_per_s;
  j["efficiency"] = p.efficiency;
  j["memory_bytes_per_rank"] = p.memory_bytes;
  j["fits"] = p.fits;
  j["runnable"] = p.runnable;
  j["cautioned"] = p.cautioned;
  j["compute_source"] = source_name(p.source);
  j["overrides"] = p.overrides();
  j["notes"] = p.notes;
  return j;
}

std::string run_command(const PlanArgs& a, const Prediction& p) {
  std::string s = (p.d.ranks > 1 ? "mpirun -np " + std::to_string(p.d.ranks) + " " : "") +
                  "crest train --config " + a.config;
  // A value with a space or braces is quoted for the shell: 'train.local_sgd={steps: 4}'.
  const auto word = [](const std::string& o) {
    return o.find_first_of(" {}") == std::string::npos ? o : "'" + o + "'";
  };
  const std::vector<std::string> mine = p.overrides();
  const auto key = [](const std::string& o) { return o.substr(0, o.find('=')); };
  for (const std::string& o : a.overrides) {  // the plan's own value of a key replaces the user's
    const bool replaced = std::any_of(mine.begin(), mine.end(),
                                      [&](const std::string& m) { return key(m) == key(o); });
    if (!replaced) s += " " + word(o);
  }
  for (const std::string& o : mine) s += " " + word(o);
  return s;
}

void print_table(const PlanArgs& a, const Machine& m, int ranks,
                 const std::vector<Prediction>& ranked) {
  std::cout << "\n"
            << ranks << " rank" << (ranks > 1 ? "s" : "") << ", global batch "
            << ranked.front().batch_per_replica * ranked.front().d.data_parallel() << ":\n";
  // The name column as wide as the longest name (a pipeline's over replicas with a lag is long).
  size_t name_width = 40;
  for (const Prediction& p : ranked) name_width = std::max(name_width, p.d.name().size() + 1);
  const int width = static_cast<int>(name_width);
  std::cout << "  " << std::left << std::setw(width) << "decomposition" << std::right
            << std::setw(10) << "step (s)" << std::setw(11) << "samples/s" << std::setw(8)
            << "effic." << std::setw(17) << "exchange/hidden" << std::setw(11) << "halo+p2p"
            << std::setw(13) << "memory/rank"
            << "  notes\n";
  for (const Prediction& p : ranked) {
    std::string notes;
    for (const std::string& n : p.notes)
      if (n.rfind("compute:", 0) != 0) notes += (notes.empty() ? "" : "; ") + n;
    const std::string exchange =
        p.gradient_exchange_s > 0
            ? fixed(p.gradient_exchange_s, 3) + "/" + fixed(100 * p.hidden_fraction(), 0) + "%"
            : "-";
    std::cout << "  " << std::left << std::setw(width) << p.d.name() << std::right << std::setw(10)
              << fixed(p.step_s, 3) << std::setw(11) << fixed(p.samples_per_s, 2) << std::setw(7)
              << fixed(100 * p.efficiency, 0) << "%" << std::setw(17) << exchange << std::setw(11)
              << fixed(p.halo_s + p.pipeline_s, 3) << std::setw(13) << human_bytes(p.memory_bytes)
              << "  " << notes << "\n";
  }
  const size_t best = recommended_index(ranked);
  if (best < ranked.size())
    std::cout << "  recommended (" << ranked[best].d.name()
              << "; the least change to training within 5 % of the fastest): "
              << run_command(a, ranked[best]) << "\n";
  else
    std::cout << "  nothing crest runs today fits " << m.name << "\n";
}

// A candidate predict() refused (a split the samples cannot take), and why.
struct LeftOut {
  std::string name, why;
};

// The candidates left out, after their rank count's table: each with its reason where there are
// few; else their names and the first one's reason (a deep network's many splits all fail on
// its first strided layer, whose reason would repeat a dozen times).
void print_left_out(const std::vector<LeftOut>& left_out) {
  constexpr size_t kInFull = 3;
  if (left_out.size() <= kInFull) {
    for (const LeftOut& l : left_out)
      std::cout << "  left out: " << l.name << ": " << l.why << "\n";
    return;
  }
  std::cout << "  left out (" << left_out.size() << "):";
  for (size_t i = 0; i < left_out.size(); ++i) std::cout << (i ? ", " : " ") << left_out[i].name;
  std::cout << "\n    e.g. " << left_out.front().name << ": " << left_out.front().why << "\n";
}

void plan(const PlanArgs& a) {
  if (a.config.empty() || a.machine.empty())
    throw_usage("crest plan needs --config FILE and --machine MACHINE.yaml");
  if (a.format != "table" && a.format != "json")
    throw_usage("crest plan --format: table or json, got '" + a.format + "'");
  if (a.global_batch < 0) throw_usage("crest plan --global-batch must be >= 1");
  if (a.local_sgd_steps < 1) throw_usage("crest plan --local-sgd-steps must be >= 1");
  const Machine m = load_machine(a.machine);
  const Config config = load_config(a.config, a.overrides);
  const ModelFacts facts = model_facts(config);
  const std::vector<int> ranks = a.ranks.empty() ? default_ranks(m) : a.ranks;
  for (int r : ranks)
    if (r < 1 || static_cast<long>(r) > static_cast<long>(m.nodes) * m.ranks_per_node)
      throw_usage("crest plan --ranks: " + std::to_string(r) + " is not between 1 and " + m.name +
                  "'s " + std::to_string(static_cast<long>(m.nodes) * m.ranks_per_node) +
                  " ranks (nodes x ranks_per_node in " + a.machine + ")");
  if (a.format == "table")
    std::cout << "crest plan: " << facts.model << " (" << config.data.model_sample_shape().str()
              << " per sample, " << facts.precision << ", " << facts.backend << ") on " << m.name
              << ": " << m.nodes << " node(s) x " << m.ranks_per_node << " ranks\n";
  for (int r : ranks) {
    const PlanOptions o =
        plan_options(config, a.global_batch > 0 ? a.global_batch : config.data.batch_size * r);
    std::vector<Prediction> predictions;
    std::vector<LeftOut> left_out;  // a split the samples cannot take: said why, after the table
    for (const Decomposition& d : candidate_decompositions(facts, r, o, a.local_sgd_steps)) {
      try {
        predictions.push_back(predict(facts, m, d, o));
      } catch (const Error& e) {
        left_out.push_back({d.name(), e.what()});
      }
    }
    if (predictions.empty()) {
      std::cout << (a.format == "table" ? "\n" + std::to_string(r) +
                                              " ranks: no decomposition holds the global batch\n"
                                        : "");
      continue;
    }
    const std::vector<Prediction> ranked = rank_predictions(std::move(predictions));
    if (a.format == "json") {
      const size_t best = recommended_index(ranked);
      for (size_t i = 0; i < ranked.size(); ++i) {
        nlohmann::json j = prediction_json(ranked[i], m, facts);
        j["recommended"] = i == best;
        std::cout << j.dump() << "\n";
      }
    } else {
      if (r == ranks.front() && !ranked.front().notes.empty())
        for (const std::string& n : ranked.front().notes)
          if (n.rfind("compute:", 0) == 0) std::cout << n << "\n";
      print_table(a, m, r, ranked);
    }
    if (a.format == "table") print_left_out(left_out);
  }
}

void plan_calibrate(const std::string& machine_file, const std::vector<std::string>& inputs) {
  if (machine_file.empty()) throw_usage("crest plan calibrate needs --machine MACHINE.yaml");
  if (inputs.empty())
    throw_usage("crest plan calibrate needs benchmark output: files of JSON lines, or - for stdin");
  Machine m = load_machine(machine_file);
  CalibrationSummary total;
  for (const std::string& in : inputs) {
    CalibrationSummary s;
    if (in == "-") {
      s = calibrate(m, std::cin, "stdin");
    } else {
      std::ifstream f(in);
      if (!f) throw_input(in + ": cannot open the benchmark output");
      s = calibrate(m, f, in);
    }
    total.trainings += s.trainings;
    total.allreduce_fits += s.allreduce_fits;
    total.loaders += s.loaders;
    total.ignored_lines += s.ignored_lines;
  }
  if (total.trainings + total.allreduce_fits + total.loaders == 0)
    throw_input(
        "crest plan calibrate: nothing to calibrate from (no crest bench train --profile "
        "on one rank, no crest bench allreduce on 2 or more ranks of one node, no crest bench "
        "loader on one rank)");
  save_measured(m);
  std::cout << "calibrated " << m.name << ": " << total.trainings << " training profile(s), "
            << total.allreduce_fits << " allreduce fit(s), " << total.loaders << " loader run(s)";
  if (m.measured_allreduce)
    std::cout << " (allreduce on " << m.measured_allreduce->ranks
              << " ranks: " << fixed(m.measured_allreduce->link.gb_s, 3) << " GB/s, "
              << fixed(m.measured_allreduce->link.latency_us, 1) << " us)";
  std::cout << "; " << total.ignored_lines << " other line(s) left alone; written to "
            << measured_path(m.file) << "\n";
}

}  // namespace

void register_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "predict step time, efficiency and memory of each decomposition on a machine");
  cmd->add_option("--config,-c", a->config, "the training config");
  cmd->add_option("--machine,-m", a->machine, "the machine description (docs/scaling.md)");
  cmd->add_option("overrides", a->overrides, "key.path=value overrides of the config");
  cmd->add_option("--ranks", a->ranks, "rank counts to plan (default: powers of two)")
      ->delimiter(',');
  cmd->add_option("--global-batch", a->global_batch,
                  "fixed global batch (default: data.batch_size per rank)");
  cmd->add_option("--local-sgd-steps", a->local_sgd_steps, "local SGD's H for its candidate");
  cmd->add_option("--format", a->format, "table or json (one JSON line per prediction)");
  auto machine = std::make_shared<std::string>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  CLI::App* cal = cmd->add_subcommand(
      "calibrate", "fold crest bench train --profile / bench allreduce output into the machine");
  cal->add_option("--machine,-m", *machine, "the machine description to calibrate");
  cal->add_option("inputs", *inputs, "files of benchmark JSON lines (- for stdin)");
  cal->callback([machine, inputs] { plan_calibrate(*machine, *inputs); });
  cmd->callback([a, cmd] {
    if (cmd->got_subcommand("calibrate")) return;
    plan(*a);
  });
}

}  // namespace crest::tools
