// What LARS and LARC share (You, Gitman, Ginsburg 2017, "Large Batch Training of Convolutional
// Networks"): which trainable tensors get a per-tensor learning rate, their norms, and the trust
// ratio that sets it.
//
// Exclusions are glob patterns (fnmatch(3): `*`, `?`, `[...]`; `*` also matches dots) on
// parameter names ("conv1.bias"). An excluded tensor gets neither the trust ratio nor weight
// decay: it takes the plain update of its gradient. The LARS/LARC defaults are the biases and the
// batch-norm scales and shifts of the registered models: CosmoFlow's `conv<i>.bias` and
// `fc<i>.bias` (it has no batch norm) and DeepCAM's `<module>.bias` (its one convolution bias,
// every batch-norm beta, the image-pool affine's shift) and `<module>.bn.weight` (every
// batch-norm gamma: the reference wraps each BatchNorm2d in a module whose child is `bn`).
// SGD's weight decay uses the same mechanism with another default: every one-dimensional tensor
// (biases and normalisation parameters whatever their names, torchvision's ResNet-50 `bn1.weight`
// and `layer1.0.downsample.1.weight` among them), as MLPerf's ResNet-50 recipe and timm
// (`ndim <= 1`) leave them without decay.
#pragma once
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/graph/param_store.hpp"

namespace crest {

// {"*.bias", "*.bn.weight"}: the default patterns (one_dimensional is on with them).
std::vector<std::string> default_lars_exclusions();

struct LarsExclusions {
  std::vector<std::string> patterns = default_lars_exclusions();
  // Every pattern must match a trainable parameter: on for a list the user wrote (a typo must
  // not silently adapt the tensors it meant), off for the defaults, which name tensors that not
  // every model has (CosmoFlow has no batch norm).
  bool every_pattern_matches = false;
  // Also every trainable tensor of at most one dimension (SGD's weight-decay default).
  bool one_dimensional = false;
  std::string key = "lars_exclude";  // the optimizer key the patterns came from (for messages)
};

// The exclusions of optimizer.lars_exclude: a list the user gave must match (a typo is an error);
// without one, the defaults, which need not.
LarsExclusions lars_exclusions_given(const std::optional<std::vector<std::string>>& patterns);
// The same for optimizer.weight_decay_exclude (SGD), whose default is every one-dimensional tensor.
LarsExclusions weight_decay_exclusions_given(
    const std::optional<std::vector<std::string>>& patterns);

// The settings LARS and LARC share, checked: eta > 0, eps >= 0, weight decay >= 0. Throws
// crest::Error (usage) starting with `who` ("lars", "larc").
void check_trust_settings(const std::string& who, double trust_coefficient, double eps,
                          double weight_decay);

// The adapted and the excluded trainable tensors of a parameter store, and the adapted ones'
// norms, measured with one VectorOps call (range_sum_squares_into) instead of two per tensor and
// left in the store's memory, where the updates compute the trust ratios (trust_ratio in
// kernels.hpp): on a device a step waits for none of them.
class AdaptedTensors {
 public:
  AdaptedTensors() = default;
  // Throws crest::Error (usage) naming optimizer.lars_exclude when exclusions.every_pattern_matches
  // and a pattern matches no trainable parameter.
  AdaptedTensors(const ParamStore& params, const LarsExclusions& exclusions);

  // Slot indices (into params.slots()) in slot order; non-trainable slots are in neither list.
  const std::vector<size_t>& adapted() const { return adapted_; }
  const std::vector<size_t>& excluded() const { return excluded_; }

  // "trust ratio on 10 tensors; 6 left alone: conv1.bias, ..." (the first few names).
  std::string describe(const ParamStore& params) const;

  // ||w||^2 and ||g||^2 of every adapted tensor from the store's flat value and gradient buffers.
  // The optimizer steps after the gradient allreduce, and gradient accumulation leaves the
  // window's averaged sum in the gradient buffer before it (TrainStep::on_gradient_ready), so
  // these are the norms of the gradient the update uses, the same on every rank.
  // A divided tensor's sums are its group's (a collective, through host memory).
  void measure(VectorOps& vec, const void* w, const void* g);
  // Where an update finds adapted()[i]'s trust ratio: its sums from the last measure().
  VectorOps::TrustRatioAt ratio_at(size_t i, double coefficient, double weight_decay,
                                   double eps) const;
  // The last measure()'s sums read back (a copy on a device): ||w||^2 of every adapted tensor,
  // then ||g||^2 of every one; zeros before the first. For reports and tests, not for steps.
  std::vector<double> squares() const;

 private:
  std::vector<size_t> adapted_, excluded_;
  std::vector<ElementRange> ranges_;       // of adapted_, in elements
  std::vector<const ParamShard*> shards_;  // of adapted_: a divided one's parts, else null
  bool divided_ = false;                   // some adapted tensor is divided
  MemoryResource* memory_ = nullptr;       // the store's
  Buffer sums_;                            // the norms' squares (squares()'s order)
};

}  // namespace crest
