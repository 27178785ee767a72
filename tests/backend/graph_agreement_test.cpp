// Whole-network backend agreement: the CosmoFlow graph on oneDNN (blocked layouts, fused
// activations, reorders) computes the same loss, outputs and parameter gradients as the
// reference backend from the same weights and batch. One graph is compiled for both backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

void compare_executors(const Graph& g, int64_t batch) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  CompileOptions c;
  c.batch = batch;
  c.seed = 9;
  Executor a(g, *ref, c), b(g, *dnn, c);
  ASSERT_EQ(a.params().bytes(), b.params().bytes());
  std::memcpy(b.params().values(), a.params().values(), a.params().bytes());
  for (const char* in : {"x", "y"}) {
    if (a.input(in).dtype() == DType::i32) {  // class labels 0..2
      for (int64_t i = 0; i < a.input(in).numel(); ++i)
        a.input(in).as<int32_t>()[i] = (i * 5 + i / 3) % 3;
    } else {
      test::fill_uniform(a.input(in), 21, 0, 2);
    }
    std::memcpy(b.input(in).data(), a.input(in).data(), a.input(in).bytes());
  }
  const double la = a.forward(), lb = b.forward();
  EXPECT_NEAR(lb, la, 1e-4 * (1 + std::abs(la)));
  a.backward();
  b.backward();
  for (size_t s = 0; s < a.params().slots().size(); ++s) {
    const double d = test::rel_distance(b.params().grad(s), a.params().grad(s));
    EXPECT_LT(d, 2e-4) << a.params().slots()[s].name;
  }
}

TEST(OneDnnGraphAgreement, CosmoFlow32) {
  CosmoFlowOptions o;
  o.input_shape = {32, 32, 32, 4};
  o.conv_size = 4;
  o.l2 = 0.01;
  const CosmoFlowModel m = build_cosmoflow(o);
  const Graph before = m.graph;
  compare_executors(m.graph, 2);
  EXPECT_EQ(m.graph, before) << "compiling changed the graph";
}

// Relative L2 distance of `got` from `want` (float64): the measure a gradient that is 0.5 % off
// fails, where compare_executors' max-difference bound (2e-4 of the largest element, plus 1 for
// gradients of size 1e-3) lets it through.
double relative_l2(const TensorView& got, const TensorView& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < static_cast<size_t>(want.numel()); ++i) {
    const double w = test::element(want, i), d = test::element(got, i) - w;
    diff += d * d;
    norm += w * w;
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

// The reference network's channel counts (conv_size 32: 4 -> 32 -> ... -> 256) reach the kernels
// and weight layouts the small fixture never does (brgconv's padded 24- and 32-wide weight
// blocks on AVX2, 16-wide on AVX-512). Every gradient against a float64 reference run from the
// same float32 weights and batch, by relative L2. Average pooling: through max pooling one
// rounding-level difference that flips a window's argmax moves a whole gradient element, so
// float32 gradients of a max-pooled network are only comparable with float64 ones where no
// window is that close to a tie (docs/testing.md).
TEST(OneDnnGraphAgreement, ReferenceChannelCountsAgainstFloat64) {
  CosmoFlowOptions o;
  o.input_shape = {16, 16, 16, 4};
  o.n_conv_layers = 4;
  o.conv_size = 32;
  o.pooling_type = Pooling::avg;
  const CosmoFlowModel m = build_cosmoflow(o);
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  CompileOptions c;
  c.batch = 2;
  c.seed = 9;
  CompileOptions c64 = c;
  c64.dtype = DType::f64;
  Executor truth(m.graph, *ref, c64), got(m.graph, *dnn, c);
  const size_t slots = got.params().slots().size();
  for (size_t s = 0; s < slots; ++s) {
    const TensorView from = got.params().value(s), to = truth.params().value(s);
    for (int64_t i = 0; i < from.numel(); ++i) to.as<double>()[i] = from.as<float>()[i];
  }
  for (const char* in : {"x", "y"}) {
    test::fill_uniform(got.input(in), 21, 0, 2);
    const TensorView from = got.input(in), to = truth.input(in);
    for (int64_t i = 0; i < from.numel(); ++i) to.as<double>()[i] = from.as<float>()[i];
  }
  const double want_loss = truth.forward(), loss = got.forward();
  EXPECT_NEAR(loss, want_loss, 1e-6 * std::abs(want_loss));
  truth.backward();
  got.backward();
  for (size_t s = 0; s < slots; ++s)
    EXPECT_LT(relative_l2(got.params().grad(s), truth.params().grad(s)), 5e-5)
        << got.params().slots()[s].name;
}

TEST(OneDnnGraphAgreement, BranchyModel) { compare_executors(test::branchy_model().graph, 3); }

TEST(OneDnnGraphAgreement, SegmentationModel) {
  compare_executors(test::segmentation_model().graph, 2);
}

TEST(OneDnnGraphAgreement, Pooling3dModel) { compare_executors(test::pooling3d_model().graph, 2); }

}  // namespace
}  // namespace crest
