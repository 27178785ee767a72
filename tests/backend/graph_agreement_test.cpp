// Whole-network backend agreement: the CosmoFlow graph on oneDNN (blocked layouts, fused
// activations, reorders) computes the same loss, outputs and parameter gradients as the
// reference backend from the same weights and batch. One graph is compiled for both backends.
#include <gtest/gtest.h>

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

TEST(OneDnnGraphAgreement, BranchyModel) { compare_executors(test::branchy_model().graph, 3); }

TEST(OneDnnGraphAgreement, SegmentationModel) {
  compare_executors(test::segmentation_model().graph, 2);
}

TEST(OneDnnGraphAgreement, Pooling3dModel) { compare_executors(test::pooling3d_model().graph, 2); }

}  // namespace
}  // namespace crest
