// The MLPerf HPC DeepCAM network: DeepLabv3+ on a modified Aligned-Xception backbone, output
// stride 16, segmenting climate fields into background, tropical cyclones and atmospheric rivers
// (../shared/reference/SPEC.md §2 as corrected by DEEPCAM.md).
//
// Node names are the reference module paths, so parameter names are the reference state_dict
// keys (xception_features.block4.rep.0.conv1.weight, bottleneck.aspp2.bn.bn.running_var, ...);
// docs/weights.md lists the few that differ and how the interchange maps them.
//
// One generalisation: the reference tiles the image-pooling branch to a hard-coded 48x72, so it
// runs only at 768x1152; here the branch is expanded to the feature map's size, which is the same
// network at 768x1152 and runs at any H, W that are multiples of 16.
#pragma once
#include <cstdint>
#include <vector>

#include "crest/graph/attributes.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

struct DeepcamOptions {
  std::vector<int64_t> input_shape{768, 1152, 16};  // H, W, C as in the files (channels last)
  int64_t n_classes = 3;
  // Per-class loss weights. Empty: the reference's f^(-1/8) of the training set's class
  // frequencies, computed in double and stored as float32 (1.0017299, 2.6146111, 1.7164197).
  std::vector<float> class_weights;
  // Every layer's channel count divided by this (1, 2, 4 or 8): the reference network is 1 (56 M
  // parameters); 8 keeps every layer, kernel, stride and dilation with about 1/64 of the
  // parameters — a reduced DeepCAM for tests and small machines. Not the reference's checkpoint
  // format unless 1.
  int64_t width_divisor = 1;
};

// The reference's loss weights (see DeepcamOptions::class_weights).
std::vector<float> deepcam_reference_class_weights();

// Inputs "x" [C, H, W] (written channels-last, as the files hold it) and "y" [H, W] integer class
// ids; prediction = the logits [n_classes, H, W]; loss = the class-weighted per-pixel softmax
// cross-entropy, a plain mean over N*H*W.
BuiltModel build_deepcam(const DeepcamOptions& o);

// The options of a `model: {name: deepcam, ...}` section's canonical attributes.
DeepcamOptions deepcam_options(const Attributes& canonical);

}  // namespace crest
