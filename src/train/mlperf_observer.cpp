// The MLPerf log as a RunObserver: the keys the hpc 3.0.0 compliance checker requires for
// CosmoFlow and DeepCAM (mlperf_logging/compliance_checker/hpc_3.0.0/{common,closed_common,
// closed_cosmoflow,closed_deepcam}.yaml), in the order and at the points the reference
// implementations (mlcommons/hpc cosmoflow/train.py, utils/callbacks.py, utils/optimizers.py;
// deepcam/src/deepCam/train.py, driver/trainer.py, driver/validation.py) log them; and the
// training 4.0.0 checker's for ResNet-50 (training_4.0.0/{common,closed_common,closed_resnet}.yaml,
// training_3.1.0/closed_resnet_{sgd,lars}.yaml: benchmark `resnet`, eval_accuracy the top-1).
// What each key holds and why: docs/mlperf.md.
#include <cmath>
#include <ostream>

#include "crest/optim/lr_schedule.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "crest/train/mllog.hpp"
#include "crest/train/observers.hpp"
#include "crest/train/optimizer_log_keys.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

// A number of a registered model's section (cosmoflow's dropout and l2); 0 for a model without it.
double model_number(const ModelConfig& m, const char* key) {
  const AttrValue* v = m.attrs.find(key);
  return v && std::holds_alternative<double>(*v) ? std::get<double>(*v) : 0.0;
}

// The batch scale of the peak rate, as the trainer's schedule computes it.
double lr_scale(const LrScheduleConfig& c, int64_t global_batch) {
  return lr_schedule_of(c).scale(global_batch);
}

std::string or_default(const std::string& value, const char* fallback) {
  return value.empty() ? fallback : value;
}

class MlperfObserver : public RunObserver {
 public:
  MlperfObserver(const std::string& path, std::ostream& log, const MlperfObserverOptions& o)
      : writer_(path, {.append = o.append, .echo = o.echo ? &log : nullptr}), options_(o) {
    log << "mllog: " << writer_.path();
    if (!writer_.moved_previous_to().empty())
      log << " (the previous log was moved to " << writer_.moved_previous_to() << ")";
    log << "\n";
  }

  // A run that ends in an exception never reaches run_stop(); its log still gets one, "aborted",
  // so the file says how the run ended instead of just stopping (the checker requires run_stop).
  ~MlperfObserver() override {
    if (!run_started_ || run_stopped_) return;
    try {
      writer_.end("run_stop", nullptr, {{"status", "aborted"}, {"epoch_num", last_epoch_}});
    } catch (...) {  // a destructor must not throw; the write failure was reported already
    }
  }

  void init_start(const Config& config) override {
    config_ = &config;
    // crest does not drop the page cache itself (that needs root; job scripts do it before
    // launching). Logged like the reference does: the key, with no value (null).
    writer_.event("cache_clear");
    writer_.start("init_start");
    const MlperfConfig& m = config.mlperf;
    writer_.event("submission_benchmark", options_.benchmark);
    // Defaults that pass the checker but say plainly that nobody filled them in.
    writer_.event("submission_org", or_default(m.org, "UNDEFINED"));
    writer_.event("submission_division", or_default(m.division, "closed"));
    writer_.event("submission_status", or_default(m.status, "research"));
    writer_.event("submission_platform", or_default(m.platform, "UNDEFINED"));
  }

  void staging_start() override { writer_.start("staging_start"); }
  void staging_stop(double seconds) override {
    writer_.end("staging_stop", nullptr, {{"staging_duration_s", seconds}});
  }

  void init_stop(const RunFacts& f) override {
    const Config& c = *config_;
    // The reference's hyperparameter keys (utils/optimizers.py, train.py): its "base" learning
    // rate is the batch-scaled peak, the warmup factor the scale that leads up to it.
    const double scale = lr_scale(c.lr_schedule, effective_batch(c, f.ranks));
    MllogValue boundaries = MllogValue::array(), factors = MllogValue::array();
    for (const auto& [epoch, factor] : c.lr_schedule.decay_schedule) {
      boundaries.push_back(epoch);
      factors.push_back(factor);
    }
    if (resnet()) return resnet_init_stop(c, f);
    writer_.event("number_of_nodes", f.nodes);
    // One GPU per rank on the CUDA backend; the CPU backends use no accelerator.
    writer_.event("accelerators_per_node",
                  f.backend.find("cuda") != std::string::npos ? f.local_ranks : 0);
    writer_.event("seed", static_cast<int64_t>(c.data.seed));
    writer_.event("global_batch_size", f.global_batch);
    writer_.event("train_samples", f.train_samples);
    writer_.event("eval_samples", f.eval_samples);
    if (deepcam()) {
      // The DeepCAM reference's own spellings (train.py, hpc_3.0.0/closed_deepcam.yaml).
      writer_.event("number_of_ranks", f.ranks);
      writer_.event("batchnorm_group_size", c.dist.batchnorm_group_size);
      writer_.event("gradient_accumulation_frequency", c.train.gradient_accumulation_frequency);
    } else {
      writer_.event("gradient_accumulation_steps", c.train.gradient_accumulation_frequency);
    }
    // A per-step schedule is DeepCAM's: its reference's optimizer and scheduler keys instead.
    if (c.lr_schedule.per_step) {
      for (const MllogKey& k : optimizer_log_keys(c)) writer_.event(k.key, k.value);
      writer_.end("init_stop");
      return;
    }
    writer_.event("opt_name", find_optimizer_type(c.optimizer.name).log_name);
    writer_.event("opt_base_learning_rate", c.lr_schedule.base_lr * scale);
    writer_.event("opt_learning_rate_warmup_epochs", c.lr_schedule.n_warmup_epochs);
    writer_.event("opt_learning_rate_warmup_factor", scale);
    // The reference logs only max(factors); the list, in boundary order, says the whole schedule.
    writer_.event("opt_learning_rate_decay_boundary_epochs", boundaries);
    writer_.event("opt_learning_rate_decay_factor", factors);
    writer_.event("dropout", model_number(c.model, "dropout"));
    // The reference's weight decay is its l2 penalty on the hidden dense kernels (model.l2).
    writer_.event("opt_weight_decay", model_number(c.model, "l2"));
    writer_.end("init_stop");
  }

  void run_start(const RunFacts& f) override {
    writer_.start("run_start");
    run_started_ = true;
    // A resumed run appends to the run's log and says where it picked up. Not a compliant MLPerf
    // run: the rules time one uninterrupted run.
    if (f.first_epoch > 0 || f.first_step > 0)
      writer_.event("crest_resumed", nullptr,
                    {{"epoch_num", f.first_epoch + 1}, {"global_step", f.first_step}});
  }

  void epoch_start(int epoch) override {
    last_epoch_ = epoch;
    writer_.start("epoch_start", nullptr, {{"epoch_num", epoch}});
  }
  void eval_start(const EpochStats& st) override {
    if (deepcam()) deepcam_train_figures(st);
    writer_.start("eval_start", nullptr, {{"epoch_num", st.epoch}});
  }
  void eval_stop(const EpochStats& st) override {
    if (deepcam()) deepcam_eval_figures(st);
    if (resnet()) resnet_eval_figures(st);
    writer_.end("eval_stop", nullptr, {{"epoch_num", st.epoch}});
  }

  void epoch_stop(const EpochStats& st) override {
    if (deepcam()) {
      deepcam_epoch_stop(st);
      return;
    }
    writer_.end("epoch_stop", nullptr, {{"epoch_num", st.epoch}});
    if (resnet()) return;  // its quality went in eval_accuracy
    // After epoch_stop, as the reference's callback does; the value is the printed one
    // (val_mae for CosmoFlow).
    const std::optional<double> quality = st.val_metric(options_.quality_metric);
    if (st.validated && quality) writer_.event("eval_error", *quality, {{"epoch_num", st.epoch}});
  }

  void run_stop(const TrainSummary& summary) override {
    // A run that got here ended normally: at its target, or with its epochs run out. The latter
    // is "success" where the task's reference says so (DeepCAM's train.py has one run_stop,
    // "success"); otherwise "success" means the target quality was reached (TrainSummary.status
    // also says "success" for a run without a target that simply ran all its epochs: not here).
    const auto& target = options_.target;
    const std::optional<double> last =
        summary.epochs.empty()
            ? std::nullopt
            : summary.epochs.back().val_metric(target ? target->metric->short_name : "");
    const bool reached = target && last && target->reached(*last);
    const bool success = reached || options_.success_when_epochs_end;
    writer_.end("run_stop", nullptr,
                {{"status", success ? "success" : "aborted"}, {"epoch_num", last_epoch_}});
    run_stopped_ = true;
  }

 private:
  bool deepcam() const { return options_.benchmark == "deepcam"; }
  bool resnet() const { return options_.benchmark == "resnet"; }

  // The training rules' hyperparameters (no HPC keys: nodes and accelerators are the system
  // description's there).
  void resnet_init_stop(const Config& c, const RunFacts& f) {
    writer_.event("seed", static_cast<int64_t>(c.data.seed));
    writer_.event("global_batch_size", f.global_batch);
    writer_.event("train_samples", f.train_samples);
    writer_.event("eval_samples", f.eval_samples);
    writer_.event("gradient_accumulation_steps", c.train.gradient_accumulation_frequency);
    for (const MllogKey& k : resnet_log_keys(c, f.steps_per_epoch)) writer_.event(k.key, k.value);
    writer_.end("init_stop");
  }

  // eval_accuracy (the validation top-1) inside the evaluation, as the references log it.
  void resnet_eval_figures(const EpochStats& st) {
    const std::optional<double> quality = st.val_metric(options_.quality_metric);
    if (st.validated && quality)
      writer_.event("eval_accuracy", *quality, {{"epoch_num", st.epoch}});
  }

  // The DeepCAM reference's training figures at the end of an epoch's training, before its
  // validation (driver/trainer.py): the rate of the last optimizer step, and train_accuracy and
  // train_loss of the last micro-batch (its IoU and its loss, means over ranks). The reference's
  // loss is the criterion divided by gradient_accumulation_frequency, so this one is too.
  void deepcam_train_figures(const EpochStats& st) {
    const MllogValue at = {{"epoch_num", st.epoch}};
    writer_.event("learning_rate", st.lr, at);
    if (const auto accuracy = st.last_batch_metric(options_.quality_metric))
      writer_.event("train_accuracy", *accuracy, at);
    const int k = config_ ? config_->train.gradient_accumulation_frequency : 1;
    writer_.event("train_loss", st.last_batch_loss / k, at);
    train_figures_logged_ = st.epoch;
  }

  // Its validation figures, before eval_stop (driver/validation.py): eval_accuracy (the
  // validation IoU) and eval_loss, and target_accuracy_reached when it got there.
  void deepcam_eval_figures(const EpochStats& st) {
    const std::optional<double> quality = st.val_metric(options_.quality_metric);
    if (!st.validated || !quality) return;
    const MllogValue at = {{"epoch_num", st.epoch}};
    writer_.event("eval_accuracy", *quality, at);
    writer_.event("eval_loss", st.val_loss, at);
    const auto& target = options_.target;
    if (target && target->reached(*quality))
      writer_.event("target_accuracy_reached", target->value, at);
  }

  // An epoch without validation logs its training figures at its end.
  void deepcam_epoch_stop(const EpochStats& st) {
    if (train_figures_logged_ != st.epoch) deepcam_train_figures(st);
    writer_.end("epoch_stop", nullptr, {{"epoch_num", st.epoch}});
  }

  MllogWriter writer_;
  MlperfObserverOptions options_;
  const Config* config_ = nullptr;  // the run's, alive from init_start to run_stop
  int last_epoch_ = 0;
  int train_figures_logged_ = 0;  // the epoch whose training figures are in the log
  bool run_started_ = false, run_stopped_ = false;
};

}  // namespace

std::unique_ptr<RunObserver> make_mlperf_observer(const std::string& path, std::ostream& log,
                                                  const MlperfObserverOptions& options) {
  return std::make_unique<MlperfObserver>(path, log, options);
}

// Wherever the run has an output_dir.
CREST_REGISTER_OBSERVER(mlperf, ObserverType{
                                    "mlperf", 30, [](const ObserverContext& c) {
                                      return c.config.output_dir.empty()
                                                 ? nullptr
                                                 : make_mlperf_observer(
                                                       c.config.output_dir + "/mllog.txt", c.log,
                                                       mlperf_options(c.config, c.task, c.resumed));
                                    }});

}  // namespace crest
