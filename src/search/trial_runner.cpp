// One trial on one group (trial_runner.hpp).
#include "trial_runner.hpp"

#include <cmath>
#include <filesystem>
#include <streambuf>

#include "crest/core/error.hpp"
#include "crest/train/run_observer.hpp"
#include "crest/train/trainer.hpp"

namespace crest::search_detail {
namespace {

// Swallows what is written (a stream without a buffer is not enough: the run log tees into the
// buffer of the stream it is given).
class DiscardBuffer final : public std::streambuf {
 protected:
  int overflow(int c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

// The group leader's view of the run: each epoch's figures go to the scheduler as they happen.
class EpochReporter final : public RunObserver {
 public:
  EpochReporter(int trial, int group, std::string metric,
                const std::function<void(const nlohmann::json&)>& report)
      : trial_(trial), group_(group), metric_(std::move(metric)), report_(report) {}
  void epoch_stop(const EpochStats& st) override {
    nlohmann::ordered_json figures;
    figures["train_loss"] = st.train_loss;
    figures["val_loss"] = st.validated ? nlohmann::json(st.val_loss) : nlohmann::json();
    for (const auto& m : st.val_metrics)
      figures["val_" + m.name] = st.validated ? nlohmann::json(m.value) : nlohmann::json();
    nlohmann::json metric = figures.contains(metric_) ? nlohmann::json(figures[metric_]) : nullptr;
    if (metric.is_number() && !std::isfinite(metric.get<double>())) metric = nullptr;
    last_epoch = st.epoch;
    report_({{"op", "epoch"},
             {"trial", trial_},
             {"group", group_},
             {"epoch", st.epoch},
             {"metric", metric},
             {"figures", figures},
             {"seconds", st.seconds}});
  }
  int last_epoch = 0;

 private:
  int trial_, group_;
  std::string metric_;
  const std::function<void(const nlohmann::json&)>& report_;
};

bool has_checkpoint(const std::string& run_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run_dir + "/checkpoints", ec))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

}  // namespace

std::string trial_dir(const std::string& out_dir, int trial) {
  return out_dir + "/trials/" + std::to_string(trial);
}

Config trial_config(const TrialSetup& setup, const Assignment& params, int trial, int epochs) {
  std::vector<std::string> overrides = setup.overrides;
  for (const auto& o : as_overrides(params)) overrides.push_back(o);
  overrides.push_back("output_dir=" + trial_dir(setup.out_dir, trial));
  overrides.push_back("data.n_epochs=" + std::to_string(epochs));
  return load_config(setup.base_config, overrides);
}

TrialOutcome run_trial(const TrialSetup& setup, const Work& work, int group_index,
                       Communicator& group,
                       const std::function<void(const nlohmann::json&)>& report) {
  TrialOutcome out;
  EpochReporter reporter(work.trial, group_index, setup.metric, report);
  try {
    const Config config = trial_config(setup, work.params, work.trial, work.epochs);
    TrainOptions options;
    options.communicator = &group;
    // A trial interrupted before its first checkpoint starts again, replacing what it left.
    options.resume = work.resume && has_checkpoint(config.output_dir);
    options.overwrite = !options.resume;
    options.extra_observers.push_back(&reporter);
    DiscardBuffer discard;
    std::ostream quiet(&discard);  // each trial's log is its train.log; stdout has the study's
    const TrainSummary summary = run_training(config, options, quiet);
    if (summary.status == "preempted") {
      out.ok = false;
      out.message = "stopped: " + summary.stop_reason;
    }
    out.stopped_early = !summary.epochs.empty() && summary.epochs.back().epoch < work.epochs;
  } catch (const std::exception& e) {
    out.ok = false;
    out.message = e.what();
  }
  return out;
}

}  // namespace crest::search_detail
