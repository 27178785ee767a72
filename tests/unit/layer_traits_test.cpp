// Layer traits declared by the layers themselves (Layer::computes_in_half, accepts_post_op): what
// the mixed-precision and fusion passes read instead of tables of kind names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/graph/layer_registry.hpp"
#include "support/layer_kinds.hpp"

namespace crest {
namespace {

using test::make_minimal_layer;

// Under bf16 and fp16 every kind computes in 16 bits but the losses (mse_loss,
// softmax_cross_entropy, a pipeline stage's upstream_gradient): a new kind has to say.
TEST(LayerTraits, EveryKindButTheLossesComputesInHalf) {
  for (const std::string& kind : layer_kind_names()) {
    const bool loss = make_minimal_layer(kind)->is_loss();
    EXPECT_EQ(make_minimal_layer(kind)->computes_in_half(), !loss) << kind;
  }
}

// Convolutions take whatever activation the backend fuses; batch norm only ReLU; nothing else
// takes a post-op.
TEST(LayerTraits, PostOpsAreTakenByConvolutionsAndBatchNormOnly) {
  auto backend = make_backend("reference");
  const EltwiseDesc relu{EltwiseKind::relu, 0.f, 0.f}, leaky{EltwiseKind::leaky_relu, 0.3f, 0.f};
  for (const std::string& kind : layer_kind_names()) {
    const auto layer = make_minimal_layer(kind);
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

// The exports name the prediction `logits` where the loss reads logits: the layer says so.
TEST(LayerTraits, OnlyTheSoftmaxCrossEntropyReadsLogits) {
  for (const std::string& kind : layer_kind_names())
    EXPECT_EQ(make_minimal_layer(kind)->reads_logits(), kind == "softmax_cross_entropy") << kind;
}

}  // namespace
}  // namespace crest
