#include "crest/models/tiramisu.hpp"

#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/shape_ops.hpp"
#include "crest/models/model_registry.hpp"

namespace crest {
namespace {

// The reference's --frequencies default (background, tropical cyclone, atmospheric river).
constexpr double kClassFrequency[3] = {0.991, 0.0266, 0.13};

// tf.layers.conv2d as the reference calls it: a bias, he_uniform kernels, zero biases, 'same'.
ConvOptions conv_options(int64_t out, int64_t kernel, int64_t stride) {
  ConvOptions o;
  o.out_channels = out;
  o.kernel = {kernel, kernel};
  o.stride = {stride, stride};
  o.same = true;
  o.bias = true;
  o.init = Init::he_uniform;
  return o;
}

// One value and the channels it has.
struct Features {
  ValueId value = -1;
  int64_t channels = 0;
};

class TiramisuBuilder {
 public:
  TiramisuBuilder(Graph& g, const TiramisuOptions& o) : g_(g), o_(o) {}

  // conv -> (batch norm) -> ReLU -> dropout, the nodes named `name`.conv, .bn, .relu, .dropout.
  ValueId conv_relu(const std::string& name, ValueId x, int64_t out, int64_t kernel,
                    int64_t stride) {
    ValueId t = g_.add(name + ".conv", layers::conv(conv_options(out, kernel, stride)), {x});
    if (o_.batch_norm) t = g_.add(name + ".bn", layers::batch_norm(tf_batch_norm()), {t});
    return dropout(name + ".dropout", g_.add(name + ".relu", layers::relu(), {t}));
  }

  ValueId dropout(const std::string& name, ValueId x) {
    if (o_.dropout == 0) return x;
    return g_.add(name, layers::dropout(static_cast<float>(o_.dropout)), {x});
  }

  // A dense block of `n` layers on `in`: its whole output, and the new features alone (what
  // the transition up above it reads).
  std::pair<Features, std::vector<ValueId>> dense_block(const std::string& name, Features in,
                                                        int64_t n) {
    std::vector<ValueId> added;
    for (int64_t j = 0; j < n; ++j) {
      const std::string layer = name + ".layers." + std::to_string(j);
      const ValueId b = conv_relu(layer, in.value, o_.growth_rate, o_.filter_size, 1);
      in = {g_.add(layer + ".concat", layers::concat(), {in.value, b}),
            in.channels + o_.growth_rate};
      added.push_back(b);
    }
    return {in, added};
  }

  // The new features of the block below, upsampled 2x keeping their channel count.
  Features transition_up(const std::string& name, const std::vector<ValueId>& added) {
    const ValueId x =
        added.size() == 1 ? added[0] : g_.add(name + ".concat", layers::concat(), added);
    const int64_t channels = static_cast<int64_t>(added.size()) * o_.growth_rate;
    ConvOptions up = conv_options(channels, 3, 2);
    up.transposed = true;  // TensorFlow's conv2d_transpose(padding='same'): exactly 2x
    return {g_.add(name + ".conv", layers::conv_transpose(up), {x}), channels};
  }

 private:
  // tf.layers.batch_normalization's defaults: moving average 0.99 (PyTorch's momentum 0.01).
  static BatchNormOptions tf_batch_norm() { return {0.01, 1e-3}; }

  Graph& g_;
  const TiramisuOptions& o_;
};

}  // namespace

std::vector<float> tiramisu_reference_class_weights() {
  double sum = 0;
  for (double f : kClassFrequency) sum += 1 / f;
  std::vector<float> w;
  for (double f : kClassFrequency) w.push_back(static_cast<float>(1 / f / sum));
  return w;
}

BuiltModel build_tiramisu(const TiramisuOptions& o) {
  const int64_t h = o.input_shape.at(0), w = o.input_shape.at(1), c = o.input_shape.at(2);
  BuiltModel m;
  Graph& g = m.graph;
  const ValueId x = g.input("x", Shape{c, h, w}, Layout::channels_last);
  const ValueId y = g.input("y", Shape{h, w}, Layout::plain, /*integer=*/true);
  TiramisuBuilder b(g, o);
  Features t{b.conv_relu("conv_input", x, o.initial_filters, o.filter_size, 1), o.initial_filters};
  std::vector<Features> skips;
  std::vector<ValueId> added;
  const size_t blocks = o.blocks.size();
  for (size_t i = 0; i < blocks; ++i) {
    std::tie(t, added) = b.dense_block("down_blocks." + std::to_string(i), t, o.blocks[i]);
    if (i + 1 == blocks) break;  // the reference's last transition down feeds nothing
    skips.push_back(t);
    const std::string td = "transitions_down." + std::to_string(i);
    t = {b.conv_relu(td, t.value, t.channels, 1, 2), t.channels};
  }
  for (size_t i = 0; i + 1 < blocks; ++i) {
    const std::string index = std::to_string(i);
    const Features up = b.transition_up("transitions_up." + index, added);
    const Features skip = skips[blocks - 2 - i];
    const Features joined{
        g.add("up_blocks." + index + ".skip", layers::concat(), {up.value, skip.value}),
        up.channels + skip.channels};
    std::tie(t, added) = b.dense_block("up_blocks." + index, joined, o.blocks[blocks - 2 - i]);
  }
  const ValueId logits =
      g.add("conv_output", layers::conv(conv_options(o.n_classes, 1, 1)), {t.value});
  m.prediction = b.dropout("conv_output.dropout", logits);
  SoftmaxCrossEntropyOptions loss;
  loss.class_weights =
      o.class_weights.empty() ? tiramisu_reference_class_weights() : o.class_weights;
  loss.scale = o.loss_scale;
  m.loss = g.add("loss", layers::softmax_cross_entropy(loss), {m.prediction, y});
  g.mark_output(m.prediction);
  g.set_loss(m.loss);
  m.external_params = torch_batch_norm_counters(g);
  return m;
}

namespace {

using O = TiramisuOptions;

std::vector<AttrField<O>> tiramisu_fields() {
  return {attr_field("input_shape", &O::input_shape),
          attr_field("n_classes", &O::n_classes),
          attr_field("blocks", &O::blocks),
          attr_field("growth_rate", &O::growth_rate),
          attr_field("initial_filters", &O::initial_filters),
          attr_field("filter_size", &O::filter_size),
          attr_field("dropout", &O::dropout),
          attr_field("batch_norm", &O::batch_norm),
          attr_field("class_weights", &O::class_weights),
          attr_field("loss_scale", &O::loss_scale)};
}

void check_shape(const O& o) {
  const auto& s = o.input_shape;
  check_image_input_shape(s);
  // Each transition down halves the image and each transition up doubles it exactly, so the
  // skips line up only when H and W divide by 2^(blocks - 1).
  const int64_t stride = int64_t{1} << (o.blocks.size() - 1);
  for (int i = 0; i < 2; ++i)
    if (s[i] < stride || s[i] % stride != 0 || s[i] > 65536)
      throw ModelKeyError("input_shape", "height and width must be multiples of " +
                                             std::to_string(stride) + " (2^(blocks - 1) for " +
                                             std::to_string(o.blocks.size()) +
                                             " blocks) up to 65536, got " + model_list_text(s));
}

void check_tiramisu(const O& o) {
  if (o.blocks.empty() || o.blocks.size() > 8)
    throw ModelKeyError("blocks", "expected 1 to 8 dense blocks, got " + model_list_text(o.blocks));
  for (int64_t n : o.blocks)
    if (n < 1 || n > 256)
      throw ModelKeyError("blocks",
                          "each block needs 1 to 256 layers, got " + model_list_text(o.blocks));
  check_shape(o);
  if (o.growth_rate < 1 || o.growth_rate > 4096)
    throw ModelKeyError("growth_rate", "expected 1 to 4096, got " + std::to_string(o.growth_rate));
  if (o.initial_filters < 1 || o.initial_filters > 4096)
    throw ModelKeyError("initial_filters",
                        "expected 1 to 4096, got " + std::to_string(o.initial_filters));
  if (o.filter_size < 1 || o.filter_size > 15 || o.filter_size % 2 == 0)
    throw ModelKeyError("filter_size",
                        "expected an odd size from 1 to 15 (a centred 'same' "
                        "kernel), got " +
                            std::to_string(o.filter_size));
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw ModelKeyError("dropout", "expected a rate in [0, 1), got " + std::to_string(o.dropout));
  if (o.n_classes < 2 || o.n_classes > 1024)
    throw ModelKeyError("n_classes",
                        "expected 2 to 1024 classes, got " + std::to_string(o.n_classes));
  if (!o.class_weights.empty()) {
    if (static_cast<int64_t>(o.class_weights.size()) != o.n_classes)
      throw ModelKeyError("class_weights", "expected " + std::to_string(o.n_classes) +
                                               " weights (one per class), got " +
                                               std::to_string(o.class_weights.size()));
    for (float v : o.class_weights)
      if (!(v > 0) || !std::isfinite(v))
        throw ModelKeyError("class_weights",
                            "weights must be finite and positive (the loss divides by the "
                            "pixels of nonzero weight, which a zero would change)");
  }
  if (!(o.loss_scale > 0) || !std::isfinite(o.loss_scale))
    throw ModelKeyError("loss_scale",
                        "expected a finite positive factor, got " + std::to_string(o.loss_scale));
}

O reference_options() {
  O o;
  o.class_weights = tiramisu_reference_class_weights();
  return o;
}

}  // namespace

TiramisuOptions tiramisu_options(const Attributes& canonical) {
  return read_model_options(tiramisu_fields(), reference_options(), canonical);
}

// The Gordon Bell runs trained it with LARC around Adam (configs/tiramisu.yaml); a benchmark's
// step runs Adam, whose update LARC's per-tensor clip only rescales the input of.
ModelKind tiramisu_kind() {
  ModelKind k = model_kind<O>("tiramisu", tiramisu_fields(), reference_options(), check_tiramisu,
                              build_tiramisu);
  k.reference_optimizer = "Adam";
  return k;
}

CREST_REGISTER_MODEL(tiramisu, tiramisu_kind());

}  // namespace crest
