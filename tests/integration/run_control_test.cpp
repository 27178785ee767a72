// An observer acts on the run through RunControl: a checkpoint it asks for at an epoch's end is
// written although train.checkpoint_every is 0, and a stop it asks for ends the run after that
// epoch as early stopping would (exit 0, its reason recorded), not at data.n_epochs.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "crest/train/config.hpp"
#include "crest/train/run_observer.hpp"
#include "crest/train/trainer.hpp"
#include "support/cli_util.hpp"

namespace crest {
namespace {

const char* kTiny = R"(
data: {name: dummy, n_train: 4, n_valid: 2, sample_shape: [16, 16, 16, 4], batch_size: 2,
       n_epochs: 5, seed: 3}
model: {name: cosmoflow, conv_size: 2, n_conv_layers: 2, fc1_size: 8, fc2_size: 8, dropout: 0}
optimizer: {name: SGD, momentum: 0.9}
train: {checkpoint_every: 0, checkpoint_keep: 10}
crest: {backend: reference, threads: 1}
)";

// Asks for a checkpoint after epoch 1 and a stop after epoch 3, having seen its validation loss.
class Callback : public RunObserver {
 public:
  void run_start(const RunFacts& facts) override { control_ = facts.control; }
  void epoch_stop(const EpochStats& st) override {
    ASSERT_NE(control_, nullptr);
    ++epochs_seen;
    if (st.epoch == 1) control_->request_checkpoint();
    if (st.epoch == 3 && st.validated) control_->request_stop("enough for this test");
  }
  int epochs_seen = 0;

 private:
  RunControl* control_ = nullptr;
};

int checkpoints_in(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    n += e.path().extension() == ".safetensors" ? 1 : 0;
  return n;
}

TEST(RunControl, AnObserverAsksForACheckpointAndAStop) {
  test::TempDir d;
  const Config c = load_config_text(kTiny, "tiny.yaml", {"output_dir=" + d.file("run")});
  Callback callback;
  TrainOptions options;
  options.extra_observers = {&callback};
  std::ostringstream log;
  const TrainSummary s = run_training(c, options, log);
  EXPECT_EQ(callback.epochs_seen, 3) << log.str();
  ASSERT_EQ(s.epochs.size(), 3u) << "the run stopped after the epoch it was asked in";
  EXPECT_EQ(s.exit_code, 0);
  EXPECT_EQ(s.status, "success") << "as early stopping ends a run without a target";
  EXPECT_EQ(s.stop_reason, "enough for this test");
  EXPECT_NE(log.str().find("stopped on an observer's request: enough for this test"),
            std::string::npos)
      << log.str();
  // Epoch 1's (asked for) and epoch 3's (the run's last): checkpoint_every 0 writes only the last.
  EXPECT_EQ(checkpoints_in(d.file("run") + "/checkpoints"), 2) << log.str();
}

}  // namespace
}  // namespace crest
