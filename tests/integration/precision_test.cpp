// crest.precision: float64 trains the reference backend in double from a config (the oracle mode
// PyTorch parity compares with); its losses agree with the float32 run's and are finite.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "crest/train/config.hpp"
#include "crest/train/trainer.hpp"
#include "support/cli_util.hpp"

namespace crest {
namespace {

// Two steps of a small CosmoFlow on dummy data, with validation (the MAE reads the prediction in
// the compile dtype against the loader's float32 targets).
const char* kTiny = R"(
data: {name: dummy, n_train: 4, n_valid: 2, sample_shape: [32, 32, 32, 4], batch_size: 2,
       n_epochs: 1, seed: 3}
model: {name: cosmoflow, conv_size: 2, n_conv_layers: 3, fc1_size: 8, fc2_size: 8, dropout: 0}
optimizer: {name: SGD, momentum: 0.9}
lr_schedule: {base_lr: 0.01}
train: {checkpoint_every: 0}
crest: {backend: reference, threads: 1}
)";

EpochStats train_at(const std::string& precision, const std::string& dir) {
  const Config c =
      load_config_text(kTiny, "tiny.yaml", {"crest.precision=" + precision, "output_dir=" + dir});
  std::ostringstream log;
  const TrainSummary s = run_training(c, TrainOptions{}, log);
  EXPECT_EQ(s.steps, 2) << log.str();
  return s.epochs.at(0);
}

TEST(Precision, Float64TrainsLikeFloat32) {
  test::TempDir d;
  const EpochStats f32 = train_at("float32", d.file("f32"));
  const EpochStats f64 = train_at("float64", d.file("f64"));
  ASSERT_TRUE(std::isfinite(f64.train_loss));
  ASSERT_TRUE(f64.validated);
  const double mae64 = f64.val_metric("mae").value(), mae32 = f32.val_metric("mae").value();
  ASSERT_TRUE(std::isfinite(f64.val_loss) && std::isfinite(mae64));
  EXPECT_GT(f64.train_loss, 0);
  EXPECT_NEAR(f64.train_loss, f32.train_loss, 1e-4 * f32.train_loss);
  EXPECT_NEAR(f64.val_loss, f32.val_loss, 1e-4 * f32.val_loss);
  EXPECT_NEAR(mae64, mae32, 1e-4 * mae32);
}

}  // namespace
}  // namespace crest
