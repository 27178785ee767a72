// DeepCAM validation under mpirun: every validation sample is read once across the ranks (a
// contiguous block per rank plus the remainder, batches as full as the samples allow), and the
// job-wide loss and IoU are the means over samples, the same for any rank count and batch size.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_util.hpp"

namespace crest {
namespace {

using test::run_crest;
using test::run_crest_mpi;
using test::TempDir;

// The reference backend evaluates each sample with the same loops whatever the batch, and a
// learning rate of 1e-30 leaves Adam's weights as initialised, so every run validates the same
// network on the same 3 samples.
std::string config(const TempDir& t, const std::string& data) {
  const std::string path = t.file("cam.yaml");
  std::ofstream(path) << "data: {name: deepcam, data_dir: " << data
                      << ", sample_shape: [32, 48, 16], channels: [0, 4, 8, 12], batch_size: 1,"
                         " n_epochs: 1, shuffle: false}\n"
                         R"(model:
  name: graph
  inputs:
    - {name: x, shape: [4, 32, 48], layout: channels_last}
    - {name: y, shape: [32, 48], integer: true}
  layers:
    - {name: conv1, kind: conv, out_channels: 4, kernel: [3, 3], same: true}
    - {name: relu1, kind: relu}
    - {name: logits, kind: conv, out_channels: 3, kernel: [1, 1]}
    - {name: loss, kind: softmax_cross_entropy, class_weights: [1, 2.6, 1.7], inputs: [logits, y]}
  outputs: [logits]
  loss: loss
optimizer: {name: Adam, lr: 1.0e-30}
train: {report: true}
crest: {backend: reference, threads: 1}
)";
  return path;
}

nlohmann::json first_epoch(const std::string& run_dir) {
  std::ifstream in(run_dir + "/report.json");
  return nlohmann::json::parse(in)["epochs"][0];
}

TEST(DeepcamValidationMpi, LossAndIouAreMeansOverSamplesForAnyRanksAndBatch) {
  TempDir t;
  const std::string data = t.file("cam");
  ASSERT_EQ(run_crest("datagen deepcam --out " + data +
                      " --train 4 --valid 3 --height 32 --width 48 --seed 2")
                .code,
            0);
  const std::string cfg = config(t, data);
  const auto one = run_crest("train --config " + cfg + " output_dir=" + t.file("one"));
  ASSERT_EQ(one.code, 0) << one.out;
  const nlohmann::json want = first_epoch(t.file("one"));
  ASSERT_TRUE(want.contains("val_iou")) << want;
  for (const char* batch : {"1", "2"}) {
    const std::string run = t.file(std::string("two-") + batch);
    const auto two = run_crest_mpi(
        2, "train --config " + cfg + " data.batch_size=" + batch + " output_dir=" + run);
    ASSERT_EQ(two.code, 0) << two.out;
    // 3 samples on 2 ranks: rank 0 reads 2, rank 1 reads 1; nothing is dropped.
    EXPECT_NE(two.out.find("validation data: 3 samples, rank 0 of 2 reads 2"), std::string::npos)
        << two.out;
    const nlohmann::json got = first_epoch(run);
    EXPECT_EQ(got["val_iou"].get<double>(), want["val_iou"].get<double>()) << batch;
    EXPECT_NEAR(got["val_loss"].get<double>(), want["val_loss"].get<double>(),
                1e-12 * want["val_loss"].get<double>())
        << batch;
  }
}

}  // namespace
}  // namespace crest
