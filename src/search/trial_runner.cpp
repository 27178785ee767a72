// One trial on one group (trial_runner.hpp).
#include "trial_runner.hpp"

#include <cmath>
#include <filesystem>
#include <streambuf>

#include "checkpoint_transfer.hpp"
#include "crest/core/error.hpp"
#include "crest/train/checkpoint.hpp"
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
  if (setup.threads > 0) overrides.push_back("crest.threads=" + std::to_string(setup.threads));
  return load_config(setup.base_config, overrides);
}

namespace {

// PBT's exploit: the donor's checkpoint becomes this trial's newest; returns the epochs it had
// done (every rank of the group gets them). Throws crest::Error (runtime) on every rank when
// the leader could not get it.
int copy_donor_state(const TrialSetup& setup, const Work& work, int group_index,
                     Communicator& group, const std::function<void(const nlohmann::json&)>& report,
                     const std::function<FetchedCheckpoint(const Work&)>& fetch) {
  int64_t epoch = -1;
  std::string problem;
  if (group.rank() == 0) {
    try {
      const FetchedCheckpoint c = fetch(work);
      const std::string path = install_checkpoint(trial_dir(setup.out_dir, work.trial), c);
      epoch = read_checkpoint_info(path).position.epoch;
      if (epoch != work.copy_epoch)
        throw_runtime(c.name + " is at epoch " + std::to_string(epoch) + ", not " +
                      std::to_string(work.copy_epoch));
      report({{"op", "copied"},
              {"trial", work.trial},
              {"group", group_index},
              {"donor", work.copy_from},
              {"epoch", epoch},
              {"checkpoint", c.name},
              {"bytes", c.bytes.size()},
              {"seconds", c.seconds}});
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  group.broadcast(&epoch, sizeof epoch, 0);
  if (epoch < 0)
    throw_runtime("copying trial " + std::to_string(work.copy_from) + "'s state failed" +
                  (problem.empty() ? "" : ": " + problem));
  return static_cast<int>(epoch);
}

}  // namespace

TrialOutcome run_trial(const TrialSetup& setup, const Work& work, int group_index,
                       Communicator& group,
                       const std::function<void(const nlohmann::json&)>& report,
                       const std::function<FetchedCheckpoint(const Work&)>& fetch) {
  TrialOutcome out;
  EpochReporter reporter(work.trial, group_index, setup.metric, report);
  try {
    const int epochs = work.epochs;
    if (work.copy_from >= 0) copy_donor_state(setup, work, group_index, group, report, fetch);
    const Config config = trial_config(setup, work.params, work.trial, epochs);
    TrainOptions options;
    options.communicator = &group;
    // A trial interrupted before its first checkpoint starts again, replacing what it left.
    options.resume = work.resume && has_checkpoint(config.output_dir);
    options.overwrite = !options.resume;
    options.extra_observers.push_back(&reporter);
    options.progress_bar = false;
    DiscardBuffer discard;
    std::ostream quiet(&discard);  // each trial's log is its train.log; stdout has the study's
    const TrainSummary summary = run_training(config, options, quiet);
    if (summary.status == "preempted") {
      out.preempted = true;
      out.message = summary.stop_reason;
    }
    out.stopped_early = !summary.epochs.empty() && summary.epochs.back().epoch < epochs;
  } catch (const std::exception& e) {
    out.ok = false;
    out.message = e.what();
  }
  return out;
}

}  // namespace crest::search_detail
