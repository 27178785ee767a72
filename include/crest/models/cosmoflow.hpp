// The MLPerf HPC CosmoFlow reference network (closed division), ../shared/reference/SPEC.md §1.
// Parameter names follow docs/weights.md: conv1..convN.{weight,bias} as [out, in, kD, kH, kW],
// fc1..fc3.{weight,bias} as [out, in] with fc1's input index in D,H,W,C order.
#pragma once
#include <string>
#include <vector>

#include "crest/core/enum_table.hpp"
#include "crest/graph/attributes.hpp"
#include "crest/graph/graph.hpp"

namespace crest {

enum class Activation { leaky_relu, relu, tanh };
enum class Pooling { max, avg };

// The reference's spellings first (they are printed); the others are accepted from files.
template <>
inline constexpr EnumEntries<Activation, 4> kEnumTable<Activation> = {
    {{Activation::leaky_relu, "LeakyReLU"},
     {Activation::leaky_relu, "lrelu"},
     {Activation::relu, "ReLU"},
     {Activation::tanh, "Tanh"}}};
template <>
inline constexpr EnumEntries<Pooling, 8> kEnumTable<Pooling> = {{{Pooling::max, "MaxPool3D"},
                                                                 {Pooling::avg, "AvgPool3D"},
                                                                 {Pooling::max, "MaxPooling3D"},
                                                                 {Pooling::max, "max"},
                                                                 {Pooling::avg, "AveragePooling3D"},
                                                                 {Pooling::avg, "AvgPooling3D"},
                                                                 {Pooling::avg, "avg"},
                                                                 {Pooling::avg, "average"}}};

struct CosmoFlowOptions {
  std::vector<int64_t> input_shape{128, 128, 128, 4};  // D, H, W, C as in the files
  int64_t kernel_size = 3;
  int64_t target_size = 4;
  int64_t conv_size = 32;
  int n_conv_layers = 5;
  int64_t fc1_size = 128;
  int64_t fc2_size = 64;
  Activation hidden_activation = Activation::leaky_relu;  // LeakyReLU: slope 0.3 (Keras default)
  Pooling pooling_type = Pooling::max;
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

// The options of a `model: {name: cosmoflow, ...}` section's canonical attributes (the registered
// model's keys, model_registry.hpp).
CosmoFlowOptions cosmoflow_options(const Attributes& canonical);

// Exact trainable parameter count for the options (8,907,556 for the reference at 128^3).
int64_t cosmoflow_parameter_count(const CosmoFlowOptions& o);

}  // namespace crest
