// The Tiramisu (FC-DenseNet, Jégou et al. 2017) as the 2018 Gordon Bell climate run trained it
// beside DeepLabv3+ (Kurth et al., "Exascale deep learning for climate analytics"): its
// TensorFlow code is azrael417/ClimDeepLearn, semanticsegm/tiramisu-tf/tiramisu_model.py, run on
// Summit with 5 dense blocks of 2, 2, 2, 4 and 5 layers, growth rate 32, 5x5 convolutions, a
// 64-filter input convolution, dropout 0.2 and no batch norm, on the 16-channel 768x1152 climate
// fields (the DeepCAM data).
//
// Down path: dense blocks (each layer conv -> ReLU -> dropout, its output concatenated after its
// input), each but the last followed by a transition down (1x1 conv, stride 2, the channels
// kept). Up path: a transition up (3x3 conv-transpose, stride 2, TensorFlow's 'same' padding) of
// the new features of the block below, concatenated with the skip (the matching down block's whole
// output), then a dense block. Output: a 1x1 conv to the classes, then dropout, as the reference.
//
// Node names are the module paths of the PyTorch peer (tests/fixtures/tiramisu_torch.py), so
// parameter names are its state_dict keys: conv_input.conv.weight,
// down_blocks.3.layers.1.conv.bias, transitions_down.0.conv.weight, transitions_up.2.conv.weight,
// up_blocks.0.layers.3.conv.weight, conv_output.bias.
#pragma once
#include <cstdint>
#include <vector>

#include "crest/graph/attributes.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

struct TiramisuOptions {
  std::vector<int64_t> input_shape{768, 1152, 16};  // H, W, C of a sample, channels last
  int64_t n_classes = 3;
  // Layers per dense block of the down path, the last being the bottleneck; the up path repeats
  // all but the last in reverse (the reference's --blocks).
  std::vector<int64_t> blocks{2, 2, 2, 4, 5};
  int64_t growth_rate = 32;      // channels each dense layer adds (--growth)
  int64_t initial_filters = 64;  // the input convolution's (nb_filter)
  int64_t filter_size = 5;       // the dense layers' and the input convolution's kernel
  double dropout = 0.2;          // after every ReLU and after the output convolution (p)
  // The reference's option (tiramisu_model.py's batchnorm, off in the Gordon Bell runs): a batch
  // norm between each conv and its ReLU but the transitions up and the output, with TensorFlow's
  // defaults (running average 0.99, epsilon 0.001).
  bool batch_norm = false;
  // Per-class loss weights; empty: the reference's, 1/f of its class frequencies 0.991, 0.0266
  // and 0.13, normalised to sum 1 (in float32).
  std::vector<float> class_weights;
  double loss_scale = 0.1;  // the loss is multiplied by this (the reference's --scale_factor)
};

// Inputs "x" [C, H, W] (written channels-last) and "y" [H, W] int32 labels; prediction = the
// logits [n_classes, H, W] (after the output dropout); loss = loss_scale times the mean over
// N x H x W of w[label] * cross-entropy (TensorFlow's SUM_BY_NONZERO_WEIGHTS with every weight
// positive).
BuiltModel build_tiramisu(const TiramisuOptions& o);

// The reference's loss weights (TiramisuOptions::class_weights).
std::vector<float> tiramisu_reference_class_weights();

// The options of a `model: {name: tiramisu, ...}` section's canonical attributes.
TiramisuOptions tiramisu_options(const Attributes& canonical);

}  // namespace crest
