// Layer traits declared by the layers themselves (Layer::computes_in_half, accepts_post_op): what
// the mixed-precision and fusion passes read instead of tables of kind names.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/graph/layer_registry.hpp"

namespace crest {
namespace {

// The smallest attributes each kind accepts (most take none).
Attributes minimal_attributes(const std::string& kind) {
  Attributes a;
  if (kind == "conv" || kind == "conv_transpose") {
    a.set("out_channels", AttrValue(int64_t{4}));
    a.set("kernel", AttrValue(std::vector<int64_t>{3, 3}));
  }
  if (kind == "leaky_relu") a.set("negative_slope", AttrValue(0.3));
  if (kind == "dense") a.set("out_features", AttrValue(int64_t{4}));
  if (kind == "max_pool" || kind == "avg_pool")
    a.set("kernel", AttrValue(std::vector<int64_t>{2, 2}));
  return a;
}

std::unique_ptr<Layer> make_layer(const std::string& kind) {
  const LayerKind& k = find_layer_kind(kind);
  return k.make(k.canonical(minimal_attributes(kind)));
}

// Under bf16 and fp16 every kind computes in 16 bits but the losses: a new kind has to say.
TEST(LayerTraits, EveryKindButTheLossesComputesInHalf) {
  for (const std::string& kind : layer_kind_names()) {
    const bool loss = kind == "mse_loss" || kind == "softmax_cross_entropy";
    EXPECT_EQ(make_layer(kind)->computes_in_half(), !loss) << kind;
  }
}

// Convolutions take whatever activation the backend fuses; batch norm only ReLU; nothing else
// takes a post-op.
TEST(LayerTraits, PostOpsAreTakenByConvolutionsAndBatchNormOnly) {
  auto backend = make_backend("reference");
  const EltwiseDesc relu{EltwiseKind::relu, 0.f, 0.f}, leaky{EltwiseKind::leaky_relu, 0.3f, 0.f};
  for (const std::string& kind : layer_kind_names()) {
    const auto layer = make_layer(kind);
    if (kind == "conv" || kind == "conv_transpose") {
      EXPECT_EQ(layer->accepts_post_op(*backend, leaky), backend->fuses(leaky)) << kind;
    } else if (kind == "batch_norm") {
      EXPECT_TRUE(layer->accepts_post_op(*backend, relu));
      EXPECT_FALSE(layer->accepts_post_op(*backend, leaky));
    } else {
      EXPECT_FALSE(layer->accepts_post_op(*backend, relu)) << kind;
    }
  }
}

}  // namespace
}  // namespace crest
