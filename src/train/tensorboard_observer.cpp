// TensorBoard scalars as a RunObserver (what is written: observers.hpp and docs/run-directory.md).
#include <algorithm>
#include <ostream>

#include "crest/train/observers.hpp"
#include "crest/train/tensorboard.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

class TensorBoardObserver : public RunObserver {
 public:
  TensorBoardObserver(const std::string& logdir, std::ostream& log) : writer_(logdir) {
    log << "tensorboard: " << writer_.path() << "\n";
  }
  void step_end(const StepInfo& s) override {
    writer_.scalar("train/loss_step", s.global_step, s.loss);
    if (s.loss_scale > 0) writer_.scalar("train/loss_scale", s.global_step, s.loss_scale);
  }
  void epoch_stop(const EpochStats& st) override {
    const int64_t e = st.epoch;
    writer_.scalar("train/loss", e, st.train_loss);
    writer_.scalar("train/learning_rate", e, st.lr);
    writer_.scalar("train/samples_per_s", e, st.samples_per_s);
    writer_.scalar("train/data_wait_pct", e,
                   100.0 * st.data_wait_s / std::max(st.train_seconds, 1e-9));
    if (st.loss_scale > 0)  // loss scaling: the epoch's updates skipped for an overflow
      writer_.scalar("train/skipped_steps", e, static_cast<double>(st.overflow_steps));
    if (st.validated) {
      writer_.scalar("validation/loss", e, st.val_loss);
      for (const MetricValue& m : st.val_metrics)
        writer_.scalar("validation/" + m.name, e, m.value);
    }
    writer_.flush();
  }
  void run_stop(const TrainSummary&) override { writer_.close(); }

 private:
  TensorBoardWriter writer_;
};

}  // namespace

std::unique_ptr<RunObserver> make_tensorboard_observer(const std::string& logdir,
                                                       std::ostream& log) {
  return std::make_unique<TensorBoardObserver>(logdir, log);
}

// Wherever the run has an output_dir.
CREST_REGISTER_OBSERVER(tensorboard,
                        ObserverType{"tensorboard", 20, [](const ObserverContext& c) {
                                       return c.config.output_dir.empty()
                                                  ? nullptr
                                                  : make_tensorboard_observer(
                                                        c.config.output_dir + "/tensorboard",
                                                        c.log);
                                     }});

}  // namespace crest
