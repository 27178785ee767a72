// The MLPerf HPC CosmoFlow reference network (closed division), ../shared/reference/SPEC.md §1.
// Parameter names follow docs/weights.md: conv1..convN.{weight,bias} as [out, in, kD, kH, kW],
// fc1..fc3.{weight,bias} as [out, in] with fc1's input index in D,H,W,C order.
#pragma once
#include <array>
#include <string>

#include "crest/graph/graph.hpp"

namespace crest {

struct CosmoFlowOptions {
  std::array<int64_t, 4> input_shape{128, 128, 128, 4};  // D, H, W, C as in the files
  int64_t kernel_size = 3;
  int64_t target_size = 4;
  int64_t conv_size = 32;
  int n_conv_layers = 5;
  int64_t fc1_size = 128;
  int64_t fc2_size = 64;
  std::string hidden_activation = "LeakyReLU";  // LeakyReLU (slope 0.3, Keras default) or ReLU
  std::string pooling_type = "MaxPool3D";       // MaxPool3D or AvgPool3D
  double dropout = 0.0;
  double l2 = 0.0;  // on the two hidden dense kernels
};

struct CosmoFlowModel {
  Graph graph;
  ValueId x = -1;           // input "x": [C, D, H, W] logical, written channels-last
  ValueId y = -1;           // targets "y": [target_size]
  ValueId prediction = -1;  // tanh(...) * 1.2
  ValueId loss = -1;
};

CosmoFlowModel build_cosmoflow(const CosmoFlowOptions& o);

// Exact trainable parameter count for the options (8,907,556 for the reference at 128^3).
int64_t cosmoflow_parameter_count(const CosmoFlowOptions& o);

}  // namespace crest
