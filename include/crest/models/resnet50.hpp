// ResNet-50 v1.5 (He et al. 2016; the MLPerf Training and torchvision variant: a bottleneck's
// stride is on its 3x3 convolution, not its first 1x1), the image-classification network of the
// CORAL-2 and MLPerf benchmarks.
//
// Node names are torchvision's module paths, so parameter names are the keys of torchvision's
// `resnet50().state_dict()` (conv1.weight, layer3.4.bn2.running_var, layer1.0.downsample.0.weight,
// fc.bias, ...), batch norms' num_batches_tracked as int64 scalars there. The initialisation is
// torchvision's: convolutions He-normal in fan-out mode, batch norms 1 and 0, the classifier
// PyTorch's Linear default.
#pragma once
#include <cstdint>
#include <vector>

#include "crest/graph/attributes.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

struct Resnet50Options {
  std::vector<int64_t> input_shape{224, 224, 3};  // H, W, C of a sample, channels last
  int64_t n_classes = 1000;
  // The cross-entropy's label smoothing: 0.1 in the MLPerf and torchvision recipes.
  double label_smoothing = 0.1;
  // Every layer's channel count divided by this (1, 2, 4 or 8): 1 is ResNet-50 (25.6 M
  // parameters at 1000 classes); the others keep every layer, kernel and stride — a reduced
  // network for tests and small machines.
  int64_t width_divisor = 1;
};

// Inputs "x" [C, H, W] (written channels-last) and "y" [] an int32 class id per sample;
// prediction = the logits [n_classes]; loss = the softmax cross-entropy with label smoothing,
// the mean over the batch.
BuiltModel build_resnet50(const Resnet50Options& o);

// The options of a `model: {name: resnet50, ...}` section's canonical attributes.
Resnet50Options resnet50_options(const Attributes& canonical);

}  // namespace crest
