// Whole-graph gradient check: the executor's backward (with fusion, in-place storage, reorders,
// gradient accumulation for a value read twice, L2 penalties) against central differences of
// its own forward, in double precision on the reference backend.
#include <gtest/gtest.h>

#include <cmath>

#include "crest/graph/executor.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

// Labels for an integer target input: a fixed pattern that uses every class.
void fill_labels(const TensorView& y, int classes) {
  for (int64_t i = 0; i < y.numel(); ++i)
    y.as<int32_t>()[i] = static_cast<int32_t>((i * 7 + i / 5) % classes);
}

void check_graph_gradients(test::SmallModel m, bool fuse) {
  auto backend = make_backend("reference");
  CompileOptions o;
  o.batch = 2;
  o.dtype = DType::f64;
  o.input_grads = true;
  o.fuse = fuse;
  o.seed = 3;
  Executor ex(m.graph, *backend, o);
  test::fill_uniform(ex.input("x"), 11);
  if (ex.input("y").dtype() == DType::i32)
    fill_labels(ex.input("y"), 3);
  else
    test::fill_uniform(ex.input("y"), 12);
  ex.forward();
  ex.backward();

  const double h = 1e-6;
  auto numeric = [&](double* p) {
    const double keep = *p;
    *p = keep + h;
    const double lp = ex.forward();
    *p = keep - h;
    const double lm = ex.forward();
    *p = keep;
    return (lp - lm) / (2 * h);
  };
  auto close = [](double a, double n) {
    return std::abs(a - n) <= 1e-6 * (1 + std::abs(n)) + 1e-8;
  };

  // The input gradient lives in the arena, which the forward passes below reuse: copy it now.
  TensorView x = ex.input("x");
  std::vector<double> gx(static_cast<size_t>(x.numel()));
  std::copy_n(ex.input_grad("x").as<double>(), gx.size(), gx.begin());
  // Analytic gradients first (forward() below overwrites activations, not parameter gradients).
  const ParamStore& ps = ex.params();
  for (size_t s = 0; s < ps.slots().size(); ++s) {
    const auto& slot = ps.slots()[s];
    double* w = ps.value(s).as<double>();
    const double* g = ps.grad(s).as<double>();
    for (size_t i = 0; i < slot.count; i += 1 + slot.count / 7) {
      const double analytic = g[i];
      const double num = numeric(&w[i]);
      EXPECT_TRUE(close(analytic, num))
          << slot.name << "[" << i << "]: analytic " << analytic << " numeric " << num;
    }
  }
  // Input gradient (x is channels-last; both views index the same storage).
  for (size_t i = 0; i < gx.size(); i += 5) {
    const double num = numeric(&x.as<double>()[i]);
    EXPECT_TRUE(close(gx[i], num)) << "x[" << i << "]: analytic " << gx[i] << " numeric " << num;
  }
}

TEST(GraphGradCheck, BranchyModelFused) { check_graph_gradients(test::branchy_model(), true); }
TEST(GraphGradCheck, BranchyModelUnfused) { check_graph_gradients(test::branchy_model(), false); }
// Transposed, strided, dilated and grouped convolution feeding a class-weighted softmax
// cross-entropy over integer labels.
TEST(GraphGradCheck, SegmentationModelFused) {
  check_graph_gradients(test::segmentation_model(), true);
}
TEST(GraphGradCheck, SegmentationModelUnfused) {
  check_graph_gradients(test::segmentation_model(), false);
}
// Average and global average pooling in 3-D, a value read by two branches, concat of pooled
// features.
TEST(GraphGradCheck, Pooling3dModel) { check_graph_gradients(test::pooling3d_model(), true); }

}  // namespace
}  // namespace crest
