// The tiny training run that end-to-end tests of checkpoints, stops and faults share: the
// CosmoFlow demo (dropout 0.5, shuffled training data) at 16^3 with 4 channels and 2 small
// convolutions, 16 training samples in 4 steps per epoch, about 0.1 s an epoch.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "support/cli_util.hpp"
#include "support/test_util.hpp"
#include "support/weights_compare.hpp"

namespace crest::test {

inline std::string tiny_cosmoflow_args() {
  return "--config " + source_path("configs/cosmoflow-demo.yaml") +
         " data.n_train=16 data.n_valid=8 data.sample_shape=[16,16,16,4]"
         " model.input_shape=[16,16,16,4] model.conv_size=4 model.n_conv_layers=2 crest.threads=2";
}

// `train` on the same tiny CosmoFlow, made deterministic across rank counts: no dropout, sorted
// order, one thread per rank and a constant per-step rate (it does not scale with the global
// batch, so 2 ranks of batch 1 take the steps of one process of batch 2). 12 training samples;
// data.batch_size and data.n_epochs are the caller's.
inline std::string tiny_sorted_training() {
  return "train --config " + source_path("configs/cosmoflow-demo.yaml") +
         " data.n_train=12 data.n_valid=4 data.sample_shape=[16,16,16,4]"
         " model.input_shape=[16,16,16,4] model.conv_size=4 model.n_conv_layers=2 model.dropout=0"
         " data.shuffle=false crest.threads=1 'lr_schedule={start_lr: 0.01}' ";
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  return text.str();
}

// A straight (never interrupted) tiny run of `epochs` epochs in d/straight must end with the
// weights in `weights` bit for bit: what a stopped and resumed run is held to.
inline void expect_straight_run_gives(const TempDir& d, int epochs, const std::string& weights) {
  const CliRun straight = run_crest(
      "train " + tiny_cosmoflow_args() + " data.n_epochs=" + std::to_string(epochs) +
      " output_dir=" + d.file("straight") + " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  expect_same_tensors(d.file("straight.safetensors"), weights);
}

}  // namespace crest::test
