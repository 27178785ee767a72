#include "crest/models/deepcam.hpp"

#include <cmath>
#include <map>
#include <string>

#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/channel_affine.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "crest/models/model_registry.hpp"

namespace crest {
namespace {

// Training-set class frequencies (background, tropical cyclone, atmospheric river).
constexpr double kClassFrequency[3] = {0.986267818390377, 0.0004578708870701058,
                                       0.01327431072255291};

struct Conv2d {
  int64_t out = 1, kernel = 1, stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = false;
  // The reference's Kaiming-normal covers the backbone and the four ASPP atrous branches; every
  // other conv keeps PyTorch's default (DEEPCAM.md, "Init").
  Init init = Init::torch_default;
};

LayerSpec conv2d(const Conv2d& c) {
  ConvOptions o;
  o.out_channels = c.out;
  o.kernel = {c.kernel, c.kernel};
  o.stride = {c.stride, c.stride};
  o.padding = {c.padding, c.padding};
  o.dilation = {c.dilation, c.dilation};
  o.groups = c.groups;
  o.bias = c.bias;
  o.init = c.init;
  return layers::conv(o);
}

// Exact 2x upsampling: (H - 1) * 2 - 2 + 3 + 1 = 2H. No bias, PyTorch's default init.
LayerSpec up2(int64_t out) {
  ConvOptions o;
  o.out_channels = out;
  o.kernel = {3, 3};
  o.stride = {2, 2};
  o.padding = {1, 1};
  o.output_padding = {1, 1};
  o.bias = false;
  o.init = Init::torch_default;
  return layers::conv_transpose(o);
}

// Adds nodes named by the reference's module paths. `at` is the current value.
class DeeplabBuilder {
 public:
  DeeplabBuilder(Graph& g, int64_t width_divisor) : g_(g), divisor_(width_divisor) {}

  // A layer's channel count: the reference's, divided by model.width_divisor.
  int64_t width(int64_t reference) const { return reference / divisor_; }

  ValueId conv(const std::string& name, ValueId x, const Conv2d& c) {
    return g_.add(name, conv2d(c), {x});
  }
  // The reference wraps every BatchNorm2d in a module whose child is `bn`.
  ValueId bn(const std::string& name, ValueId x) {
    return g_.add(name + ".bn", layers::batch_norm(), {x});
  }
  ValueId relu(const std::string& name, ValueId x) { return g_.add(name, layers::relu(), {x}); }
  ValueId conv_bn_relu(const std::string& conv_name, const std::string& bn_name, ValueId x,
                       const Conv2d& c) {
    return relu(bn_name + ".relu", bn(bn_name, conv(conv_name, x, c)));
  }

  // 3x3 depthwise (padding = dilation: 'same' at stride 1) then 1x1 pointwise, no bias.
  ValueId sep_conv(const std::string& name, ValueId x, int64_t cin, int64_t cout, int64_t stride,
                   int64_t dilation) {
    const Init he = Init::kaiming_normal;
    x = conv(name + ".conv1", x, {cin, 3, stride, dilation, dilation, cin, false, he});
    return conv(name + ".pointwise", x, {cout, 1, 1, 0, 1, 1, false, he});
  }

  struct BlockShape {
    int64_t cin, cout, reps, stride = 1, dilation = 1;
    bool end_relu = true, grow_first = true, is_last = false;
  };

  // Xception block: body [SepConv, BN, ReLU] x reps (the last ReLU dropped), then a stride-2 or
  // an is_last SepConv without BN; plus the skip path; ReLU at the end unless end_relu is off.
  // Body nodes are `rep.<i>` with the ReLUs counted in i, as the reference's nn.Sequential.
  ValueId block(const std::string& name, ValueId x, const BlockShape& b) {
    ValueId skip = x;
    if (b.cout != b.cin || b.stride != 1) {
      skip = conv(name + ".skip", x, {b.cout, 1, b.stride, 0, 1, 1, false, Init::kaiming_normal});
      skip = bn(name + ".skipbn", skip);
    }
    ValueId t = x;
    int index = 0;
    for (int64_t r = 0; r < b.reps; ++r) {
      const bool widen = b.grow_first ? r == 0 : r == b.reps - 1;
      const int64_t cin = b.grow_first ? (r == 0 ? b.cin : b.cout) : b.cin;
      const int64_t cout = widen ? b.cout : cin;
      t = sep_conv(rep(name, index++), t, cin, cout, 1, b.dilation);
      t = bn(rep(name, index++), t);
      if (r + 1 < b.reps) t = relu(rep(name, index), t);
      ++index;
    }
    --index;  // the dropped ReLU's index goes to the SepConv that follows
    if (b.stride != 1) {
      t = sep_conv(rep(name, index), t, b.cout, b.cout, b.stride, 1);
    } else if (b.is_last) {
      t = sep_conv(rep(name, index), t, b.cout, b.cout, 1, 1);
    }
    t = g_.add(name + ".add", layers::add(), {t, skip});
    return b.end_relu ? relu(name + ".relu", t) : t;
  }

 private:
  static std::string rep(const std::string& block, int i) {
    return block + ".rep." + std::to_string(i);
  }
  Graph& g_;
  int64_t divisor_;
};

struct Backbone {
  ValueId features = -1;   // 2048 x H/16 x W/16
  ValueId low_level = -1;  // 128 x H/4 x W/4, after block1's ReLU
};

// Modified Aligned-Xception, output stride 16: the encoder.
Backbone xception(DeeplabBuilder& b, ValueId x, int64_t in_channels) {
  const std::string p = "xception_features.";
  const Init he = Init::kaiming_normal;
  x = b.conv_bn_relu(p + "conv1", p + "bn1", x, {b.width(32), 3, 2, 1, 1, 1, false, he});
  x = b.conv_bn_relu(p + "conv2", p + "bn2", x, {b.width(64), 3, 1, 1, 1, 1, false, he});
  // The reference keeps block1's output as the low-level features and then applies an in-place
  // ReLU to that same tensor, so the decoder sees the features after the ReLU (DEEPCAM.md 1).
  x = b.block(p + "block1", x, {b.width(64), b.width(128), 2, 2, 1, /*end_relu=*/false});
  Backbone out;
  out.low_level = x = b.relu(p + "block1.relu", x);
  x = b.block(p + "block2", x, {b.width(128), b.width(256), 2, 2});
  x = b.block(p + "block3", x, {b.width(256), b.width(728), 2, 2, 1, true, true, /*is_last=*/true});
  for (int i = 4; i <= 19; ++i)  // middle flow
    x = b.block(p + "block" + std::to_string(i), x, {b.width(728), b.width(728), 3});
  x = b.block(p + "block20", x,
              {b.width(728), b.width(1024), 2, 1, 1, false, /*grow_first=*/false, true});
  const int64_t exit_widths[3][2] = {{1024, 1536}, {1536, 1536}, {1536, 2048}};
  for (int i = 0; i < 3; ++i) {  // exit flow: dilated SepConvs
    const std::string k = std::to_string(i + 3);
    x = b.sep_conv(p + "conv" + k, x, b.width(exit_widths[i][0]), b.width(exit_widths[i][1]), 1, 2);
    x = b.relu(p + "bn" + k + ".relu", b.bn(p + "bn" + k, x));
  }
  (void)in_channels;  // the stem's conv takes whatever the input has
  out.features = x;
  return out;
}

// Atrous spatial pyramid pooling: four atrous branches and the image-pooling branch, concatenated
// and projected to 256 channels.
ValueId aspp(Graph& g, DeeplabBuilder& b, ValueId x) {
  const std::string p = "bottleneck.";
  std::vector<ValueId> branches;
  const int64_t rates[4] = {1, 6, 12, 18};
  for (int i = 0; i < 4; ++i) {
    const std::string name = p + "aspp" + std::to_string(i + 1);
    const int64_t r = rates[i];
    const int64_t out = b.width(256);
    const Conv2d c = r == 1 ? Conv2d{out, 1, 1, 0, 1, 1, false, Init::kaiming_normal}
                            : Conv2d{out, 3, 1, r, r, 1, false, Init::kaiming_normal};
    branches.push_back(b.conv_bn_relu(name + ".atrous_convolution", name + ".bn", x, c));
  }
  // global average -> 1x1 conv -> per-channel affine -> ReLU, expanded to the feature size
  const std::string pool = p + "global_avg_pool.global_average_pool.";
  PoolOptions gap;
  gap.kind = PoolKind::avg_include_pad;
  gap.kernel = {1, 1};
  gap.global = true;
  ValueId t = g.add(pool + "0", layers::pool(gap), {x});
  t = b.conv(pool + "1", t, {b.width(256), 1, 1, 0, 1, 1, false, Init::torch_default});
  t = g.add(pool + "2", layers::channel_affine(), {t});
  t = b.relu(pool + "3", t);
  branches.push_back(g.add(p + "global_avg_pool.expand", layers::expand_as(), {t, x}));
  t = g.add(p + "concat", layers::concat(), branches);
  return b.conv_bn_relu(p + "conv", p + "bn", t,
                        {b.width(256), 1, 1, 0, 1, 1, false, Init::torch_default});
}

// The decoder: 4x up, concat with the projected low-level features, two 3x3 convs and a 1x1 with
// bias, then 4x up to the logits (the last transposed conv has neither BN nor bias).
ValueId decoder(Graph& g, DeeplabBuilder& b, ValueId x, ValueId low, int64_t n_classes) {
  const std::string p = "upsample.";
  for (int i = 0; i < 2; ++i) {
    const std::string at = p + "deconv1." + std::to_string(3 * i);
    const std::string bn = p + "deconv1." + std::to_string(3 * i + 1);
    x = b.relu(bn + ".relu", b.bn(bn, g.add(at, up2(b.width(256)), {x})));
  }
  x = g.add(p + "concat", layers::concat(), {x, low});
  const int64_t mid = b.width(256);
  x = b.conv_bn_relu(p + "conv1.0", p + "conv1.1", x, {mid, 3, 1, 1});
  x = b.conv_bn_relu(p + "conv1.3", p + "conv1.4", x, {mid, 3, 1, 1});
  x = b.conv(p + "conv1.6", x, {mid, 1, 1, 0, 1, 1, /*bias=*/true});
  x = b.relu(p + "deconv2.1.relu", b.bn(p + "deconv2.1", g.add(p + "deconv2.0", up2(mid), {x})));
  return g.add(p + "last_deconv.0", up2(n_classes), {x});
}

// Where the reference's state_dict differs from crest's names and shapes: PyTorch's batch-norm
// counters are int64 scalars, and the image-pool affine's parameters are `weights` and `bias`
// of shape [C, 1, 1].
std::map<std::string, ExternalParam> reference_names(const Graph& g, int64_t pool_channels) {
  std::map<std::string, ExternalParam> names = torch_batch_norm_counters(g);
  const std::string affine = "bottleneck.global_avg_pool.global_average_pool.2.";
  names[affine + "weight"] = {affine + "weights", {pool_channels, 1, 1}};
  names[affine + "bias"] = {affine + "bias", {pool_channels, 1, 1}};
  return names;
}

}  // namespace

std::vector<float> deepcam_reference_class_weights() {
  std::vector<float> w;
  for (double f : kClassFrequency) w.push_back(static_cast<float>(std::pow(f, -0.125)));
  return w;
}

BuiltModel build_deepcam(const DeepcamOptions& o) {
  const int64_t h = o.input_shape.at(0), w = o.input_shape.at(1), c = o.input_shape.at(2);
  BuiltModel m;
  Graph& g = m.graph;
  const ValueId x = g.input("x", Shape{c, h, w}, Layout::channels_last);
  const ValueId y = g.input("y", Shape{h, w}, Layout::plain, /*integer=*/true);
  DeeplabBuilder b(g, o.width_divisor);
  const Backbone enc = xception(b, x, c);
  const ValueId context = aspp(g, b, enc.features);
  const ValueId low = b.conv_bn_relu("conv2", "bn2", enc.low_level, {b.width(48), 1, 1, 0});
  m.prediction = decoder(g, b, context, low, o.n_classes);
  std::vector<float> weights =
      o.class_weights.empty() ? deepcam_reference_class_weights() : o.class_weights;
  m.loss = g.add("loss", layers::softmax_cross_entropy(weights), {m.prediction, y});
  g.mark_output(m.prediction);
  g.set_loss(m.loss);
  m.external_params = reference_names(g, b.width(256));
  return m;
}

namespace {

using O = DeepcamOptions;

std::vector<AttrField<O>> deepcam_fields() {
  return {attr_field("input_shape", &O::input_shape), attr_field("n_classes", &O::n_classes),
          attr_field("class_weights", &O::class_weights),
          attr_field("width_divisor", &O::width_divisor)};
}

void check_deepcam(const O& o) {
  const auto& s = o.input_shape;
  check_image_input_shape(s);
  for (int i = 0; i < 2; ++i)
    if (s[i] < 16 || s[i] % 16 != 0)
      throw ModelKeyError("input_shape",
                          "height and width must be positive multiples of 16 (output stride 16), "
                          "got " +
                              model_list_text(s));
  if (o.width_divisor != 1 && o.width_divisor != 2 && o.width_divisor != 4 && o.width_divisor != 8)
    throw ModelKeyError("width_divisor",
                        "expected 1, 2, 4 or 8 (it must divide every layer's "
                        "width, 48 and 728 among them), got " +
                            std::to_string(o.width_divisor));
  if (o.n_classes < 2 || o.n_classes > 1024)
    throw ModelKeyError("n_classes",
                        "expected 2 to 1024 classes, got " + std::to_string(o.n_classes));
  if (!o.class_weights.empty()) {
    if (static_cast<int64_t>(o.class_weights.size()) != o.n_classes)
      throw ModelKeyError("class_weights", "expected " + std::to_string(o.n_classes) +
                                               " weights (one per class), got " +
                                               std::to_string(o.class_weights.size()));
    for (float v : o.class_weights)
      if (!(v >= 0) || !std::isfinite(v))
        throw ModelKeyError("class_weights", "weights must be finite and not negative");
  }
}

O reference_options() {
  O o;
  o.class_weights = deepcam_reference_class_weights();
  return o;
}

}  // namespace

DeepcamOptions deepcam_options(const Attributes& canonical) {
  return read_model_options(deepcam_fields(), reference_options(), canonical);
}

// The reference trains with apex's FusedLAMB.
ModelKind deepcam_kind() {
  ModelKind k =
      model_kind<O>("deepcam", deepcam_fields(), reference_options(), check_deepcam, build_deepcam);
  k.reference_optimizer = "LAMB";
  return k;
}

CREST_REGISTER_MODEL(deepcam, deepcam_kind());

}  // namespace crest
