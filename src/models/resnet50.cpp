#include "crest/models/resnet50.hpp"

#include <cmath>
#include <string>

#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "crest/models/model_registry.hpp"

namespace crest {
namespace {

constexpr int64_t kExpansion = 4;  // a bottleneck's output is 4x its width
// Per stage (layer1..layer4): bottlenecks, width, stride of the first.
constexpr int64_t kStages[4][3] = {{3, 64, 1}, {4, 128, 2}, {6, 256, 2}, {3, 512, 2}};

// A bias-free square convolution with torchvision's He-normal (fan-out) initialisation.
LayerSpec conv(int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  ConvOptions o;
  o.out_channels = out;
  o.kernel = {kernel, kernel};
  o.stride = {stride, stride};
  o.padding = {padding, padding};
  o.bias = false;
  o.init = Init::kaiming_normal_fan_out;
  return layers::conv(o);
}

class ResnetBuilder {
 public:
  ResnetBuilder(Graph& g, int64_t width_divisor) : g_(g), divisor_(width_divisor) {}

  int64_t width(int64_t reference) const { return reference / divisor_; }

  // conv -> batch norm named `conv_name`, `bn_name`.
  ValueId conv_bn(const std::string& conv_name, const std::string& bn_name, ValueId x,
                  const LayerSpec& c) {
    return g_.add(bn_name, layers::batch_norm(), {g_.add(conv_name, c, {x})});
  }
  ValueId relu(const std::string& name, ValueId x) { return g_.add(name, layers::relu(), {x}); }

  // torchvision's Bottleneck: 1x1 to `w`, 3x3 with the stride (v1.5), 1x1 to 4w, plus the input
  // (projected by downsample.0/1 where the shape changes), then ReLU.
  ValueId bottleneck(const std::string& name, ValueId x, int64_t w, int64_t stride, bool project) {
    ValueId t = relu(name + ".relu1", conv_bn(name + ".conv1", name + ".bn1", x, conv(w, 1, 1, 0)));
    t = relu(name + ".relu2", conv_bn(name + ".conv2", name + ".bn2", t, conv(w, 3, stride, 1)));
    t = conv_bn(name + ".conv3", name + ".bn3", t, conv(w * kExpansion, 1, 1, 0));
    const ValueId skip = project ? conv_bn(name + ".downsample.0", name + ".downsample.1", x,
                                           conv(w * kExpansion, 1, stride, 0))
                                 : x;
    return relu(name + ".relu3", g_.add(name + ".add", layers::add(), {t, skip}));
  }

 private:
  Graph& g_;
  int64_t divisor_;
};

}  // namespace

BuiltModel build_resnet50(const Resnet50Options& o) {
  const int64_t h = o.input_shape.at(0), w = o.input_shape.at(1), c = o.input_shape.at(2);
  BuiltModel m;
  Graph& g = m.graph;
  const ValueId x = g.input("x", Shape{c, h, w}, Layout::channels_last);
  const ValueId y = g.input("y", Shape{}, Layout::plain, /*integer=*/true);
  ResnetBuilder b(g, o.width_divisor);
  ValueId t = b.relu("relu", b.conv_bn("conv1", "bn1", x, conv(b.width(64), 7, 2, 3)));
  PoolOptions stem_pool;
  stem_pool.kind = PoolKind::max;
  stem_pool.kernel = {3, 3};
  stem_pool.stride = {2, 2};
  stem_pool.padding = {1, 1};
  t = g.add("maxpool", layers::pool(stem_pool), {t});
  int64_t channels = b.width(64);
  for (int s = 0; s < 4; ++s) {
    const int64_t blocks = kStages[s][0], width = b.width(kStages[s][1]), stride = kStages[s][2];
    for (int64_t i = 0; i < blocks; ++i) {
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(i);
      const bool first = i == 0;
      const bool project = first && (stride != 1 || channels != width * kExpansion);
      t = b.bottleneck(name, t, width, first ? stride : 1, project);
      channels = width * kExpansion;
    }
  }
  PoolOptions average;
  average.kind = PoolKind::avg_include_pad;
  average.kernel = {1, 1};
  average.global = true;
  t = g.add("flatten", layers::flatten(), {g.add("avgpool", layers::pool(average), {t})});
  m.prediction =
      g.add("fc", layers::dense(DenseOptions{o.n_classes, true, Init::torch_default}), {t});
  SoftmaxCrossEntropyOptions loss;
  loss.label_smoothing = o.label_smoothing;
  m.loss = g.add("loss", layers::softmax_cross_entropy(loss), {m.prediction, y});
  g.mark_output(m.prediction);
  g.set_loss(m.loss);
  m.external_params = torch_batch_norm_counters(g);
  return m;
}

namespace {

using O = Resnet50Options;

std::vector<AttrField<O>> resnet50_fields() {
  return {attr_field("input_shape", &O::input_shape), attr_field("n_classes", &O::n_classes),
          attr_field("label_smoothing", &O::label_smoothing),
          attr_field("width_divisor", &O::width_divisor)};
}

void check_resnet50(const O& o) {
  const auto& s = o.input_shape;
  check_image_input_shape(s);
  // The stem and four stages halve the image five times (stride 32); smaller inputs would leave
  // a stage with nothing to convolve.
  if (s[0] < 32 || s[1] < 32 || s[0] > 65536 || s[1] > 65536)
    throw ModelKeyError("input_shape",
                        "height and width must be in [32, 65536] (the network's stride is 32), "
                        "got " +
                            model_list_text(s));
  if (o.width_divisor != 1 && o.width_divisor != 2 && o.width_divisor != 4 && o.width_divisor != 8)
    throw ModelKeyError("width_divisor",
                        "expected 1, 2, 4 or 8, got " + std::to_string(o.width_divisor));
  if (o.n_classes < 2 || o.n_classes > 1000000)
    throw ModelKeyError("n_classes",
                        "expected 2 to 1000000 classes, got " + std::to_string(o.n_classes));
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1))
    throw ModelKeyError("label_smoothing",
                        "expected a value in [0, 1), got " + std::to_string(o.label_smoothing));
}

}  // namespace

Resnet50Options resnet50_options(const Attributes& canonical) {
  return read_model_options(resnet50_fields(), O{}, canonical);
}

// The MLPerf ResNet-50 reference trains with SGD and momentum (LARS at large batches).
ModelKind resnet50_kind() {
  return model_kind<O>("resnet50", resnet50_fields(), O{}, check_resnet50, build_resnet50);
}

CREST_REGISTER_MODEL(resnet50, resnet50_kind());

}  // namespace crest
