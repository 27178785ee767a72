// The performance report of `crest train` (train.report: true) as a RunObserver: collects the
// run's facts, every epoch's figures and the per-layer profile, and writes
// output_dir/report.{json,html} when the run stops (report.hpp, docs/report.md).
#include <cstdint>
#include <ostream>

#include "crest/core/error.hpp"
#include "crest/train/observers.hpp"
#include "crest/train/report.hpp"
#include "crest/train/task.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

class ReportObserver : public RunObserver {
 public:
  ReportObserver(std::string dir, const Task& task, std::ostream& log)
      : dir_(std::move(dir)), log_(log) {
    // Fail before training, not after hours of it, when the report could not be written.
    check_report_dir(dir_);
    report_.run.model = task.name;
    for (const Metric* m : task.metrics) report_.run.metrics.push_back({m->short_name, m->title});
  }

  void run_start(const RunFacts& f) override {
    ReportRun& u = report_.run;
    u.source = "crest train";
    if (f.config != nullptr) {
      u.config = f.config->source;
      u.batch_per_rank = f.config->data.batch_size;
    }
    u.backend = f.backend;
    u.isa = f.isa;
    u.ranks = f.ranks;
    u.nodes = f.nodes;
    u.threads = f.threads;
    u.global_batch = f.global_batch;
    u.parameter_count = f.parameter_count;
    u.steps_per_epoch = f.steps_per_epoch;
    u.train_samples = f.train_samples;
    u.eval_samples = f.eval_samples;
    u.train_flops_per_step = f.train_flops_per_step;
    // A resumed run's report covers the whole run: the checkpoint brings the earlier epochs.
    if (f.previous_epochs != nullptr)
      for (const EpochStats& e : *f.previous_epochs) epoch_stop(e);
  }

  void epoch_stop(const EpochStats& s) override {
    ReportEpoch e;
    e.epoch = s.epoch;
    e.lr = s.lr;
    e.train_loss = s.train_loss;
    e.validated = s.validated;
    e.val_loss = s.validated ? s.val_loss : kReportNaN;
    if (s.validated)
      for (const ReportMetric& m : report_.run.metrics)
        e.val_metrics.push_back(s.val_metric(m.name).value_or(kReportNaN));
    e.seconds = s.seconds;
    e.train_seconds = s.train_seconds;
    e.samples_per_s = s.samples_per_s;
    e.data_wait_s = s.data_wait_s;
    e.allreduce_s = s.allreduce_s;
    e.allreduce_exposed_s = s.allreduce_exposed_s;
    report_.epochs.push_back(e);
  }

  void layer_profile(const std::vector<OpProfile>& ops, int64_t steps) override {
    ops_ = ops;
    report_.profiled_steps = steps;
  }

  void halo_profile(const std::vector<SpatialSplit::HaloLayer>& layers) override { halo_ = layers; }

  void run_stop(const TrainSummary& summary) override {
    ReportRun& u = report_.run;
    u.status = summary.status;
    if (u.parameter_count == 0) u.parameter_count = summary.parameter_count;
    report_.time = report_time(report_.epochs);
    const double steps =
        static_cast<double>(u.steps_per_epoch) * static_cast<double>(report_.epochs.size());
    if (steps > 0 && report_.time.steps_s > 0) {
      u.step_s = report_.time.steps_s / steps;
      u.samples_per_s = steps * static_cast<double>(u.global_batch) / report_.time.steps_s;
    }
    // The peak is measured after training so it neither slows the run nor competes with it for
    // the cores; a failed measurement costs the % column, not the report.
    try {
      auto backend = make_backend(u.backend);
      backend->set_threads(u.threads);
      report_.peak = measure_report_peak(*backend, u.threads);
    } catch (const Error& e) {
      report_.peak =
          ReportPeak{kReportNaN, "none", std::string("the peak measurement failed: ") + e.what()};
    }
    report_.layers = report_layers(ops_, report_.profiled_steps, report_.peak.gflops);
    add_halo_layers(report_.layers, halo_, report_.profiled_steps);
    auto& notes = report_.notes;
    notes.push_back(
        "Per-layer times come from a clock read around every op of every training step "
        "(train.report: true turns "
        "this on), which makes the run slightly slower than one without the report.");
    if (u.ranks > 1)
      notes.push_back(
          "Per-layer times are rank 0's; epoch figures are job-wide (data wait and allreduce as "
          "the "
          "ranks' mean).");
    if (!summary.epochs.empty() && summary.stage_s > 0)
      notes.push_back("Staging to data.stage_dir took " +
                      std::to_string(static_cast<int64_t>(summary.stage_s + 0.5)) +
                      " s before the first epoch (not in the time breakdown).");
    const std::string page = write_report(dir_, report_);
    log_ << "report: " << page << " (and report.json)\n";
  }

 private:
  std::string dir_;
  std::ostream& log_;
  PerformanceReport report_;
  std::vector<OpProfile> ops_;
  std::vector<SpatialSplit::HaloLayer> halo_;
};

}  // namespace

std::unique_ptr<RunObserver> make_report_observer(const std::string& dir, const Task& task,
                                                  std::ostream& log) {
  return std::make_unique<ReportObserver>(dir, task, log);
}

// train.report: true.
CREST_REGISTER_OBSERVER(report, ObserverType{"report", 40, [](const ObserverContext& c) {
                                               if (!c.config.train.report)
                                                 return std::unique_ptr<RunObserver>();
                                               if (c.config.output_dir.empty())
                                                 throw_usage(
                                                     "train.report: true needs an output_dir to "
                                                     "write report.html into");
                                               return make_report_observer(c.config.output_dir,
                                                                           c.task, c.log);
                                             }});

}  // namespace crest
