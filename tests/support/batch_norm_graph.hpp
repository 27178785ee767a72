// A small network with batch norm, as a run config, for the tests of synchronised batch norm
// (data-parallel and pipeline): on the built-in synthetic data, unshuffled, so on two ranks rank
// r's batch j is sample 2 j + r and the two ranks' batches together are one rank's batch j of two.
#pragma once
#include <string>

namespace crest::test {

// `blocks` blocks of 3x3x3 convolution (4 channels, no bias), batch norm and ReLU, named conv1,
// bn1, act1, conv2, ...; then max pooling, a dense head and an MSE loss. `crest`: the crest
// section (a flow map).
inline std::string batch_norm_graph_config(int blocks, int n_train, int n_valid,
                                           const std::string& crest = "{threads: 1}") {
  std::string layers;
  for (int b = 1; b <= blocks; ++b) {
    const std::string i = std::to_string(b);
    layers += "    - {name: conv" + i +
              ", kind: conv, out_channels: 4, kernel: [3, 3, 3], same: true, bias: false}\n"
              "    - {name: bn" +
              i +
              ", kind: batch_norm}\n"
              "    - {name: act" +
              i + ", kind: relu}\n";
  }
  return "data: {name: dummy, n_train: " + std::to_string(n_train) +
         ", n_valid: " + std::to_string(n_valid) +
         ", sample_shape: [8, 8, 8, 2], target_shape: [4],\n"
         "       n_epochs: 1, shuffle: false, seed: 3}\n"
         "model:\n"
         "  name: graph\n"
         "  inputs:\n"
         "    - {name: x, shape: [2, 8, 8, 8], layout: channels_last}\n"
         "    - {name: y, shape: [4]}\n"
         "  layers:\n" +
         layers +
         "    - {name: pool1, kind: max_pool, kernel: [4, 4, 4]}\n"
         "    - {name: flatten, kind: flatten}\n"
         "    - {name: fc, kind: dense, out_features: 4}\n"
         "    - {name: loss, kind: mse_loss, inputs: [fc, y]}\n"
         "  outputs: [fc]\n"
         "  loss: loss\n"
         "optimizer: {name: SGD, momentum: 0.9}\n"
         "lr_schedule: {start_lr: 0.05}\n"
         "crest: " +
         crest + "\n";
}

}  // namespace crest::test
