// Whole networks on the CUDA backend against the reference backend, on a GPU: the same graph,
// weights and batch; the loss, every parameter gradient, and the weights after three steps of
// SGD with momentum (each backend's own optimizer kernel) agree within 1e-4. Tensors go in and
// come out through the backend's memory resource (test::write_host, test::HostCopy). Skipped
// where no device is usable (scripts/device-check.sh runs it on the GPU machine).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "support/host_copy.hpp"
#include "support/mirrored_values.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

constexpr double kBound = 1e-4;  // relative (max error over 1 + max magnitude)
constexpr int kSteps = 3;

// The reference's weights and batch written into `ex` on `backend`.
void copy_state(const Executor& from, Executor& ex, Backend& backend, const Graph& g) {
  HostStaging weights(backend.memory(), ex.params().values(), ex.params().bytes(), false);
  std::memcpy(weights.data(), from.params().values(), from.params().bytes());
  weights.commit();
  for (const auto& in : g.inputs())
    test::write_host(backend.memory(), ex.input(in.name), [&](const TensorView& t) {
      std::memcpy(t.data(), from.input(in.name).data(), t.bytes());
    });
}

// Loss and gradients of one step, then the SGD update, on both; `step` names the round.
void expect_step_agrees(Executor& ref, Executor& ex, Backend& backend, int step) {
  const double want = ref.forward(), got = ex.forward();
  EXPECT_NEAR(got, want, kBound * (1 + std::abs(want))) << "loss, step " << step;
  ref.backward();
  ex.backward();
  for (size_t s = 0; s < ref.params().slots().size(); ++s)
    EXPECT_LT(test::rel_distance(test::HostCopy(backend.memory(), ex.params().grad(s)).view(),
                                 ref.params().grad(s)),
              kBound)
        << ref.params().slots()[s].name << " gradient, step " << step;
}

void expect_training_agrees(const Graph& g, int64_t batch) {
  auto reference = make_backend("reference");
  auto cuda = make_backend("cuda");
  CompileOptions o;
  o.batch = batch;
  o.seed = 9;
  Executor ref(g, *reference, o), ex(g, *cuda, o);
  ASSERT_EQ(ref.params().bytes(), ex.params().bytes());
  for (const auto& in : g.inputs()) {
    const TensorView t = ref.input(in.name);
    if (t.dtype() == DType::i32)  // class labels 0..2
      for (int64_t i = 0; i < t.numel(); ++i)
        t.as<int32_t>()[i] = static_cast<int32_t>((i * 5 + i / 3) % 3);
    else
      test::fill_uniform(t, 21, 0, 2);
  }
  copy_state(ref, ex, *cuda, g);
  // Momentum buffers, zero on both.
  const size_t count = ref.params().trainable_count_padded();
  std::vector<float> ref_velocity(count, 0.f);
  Buffer velocity(count * sizeof(float), 256, cuda->memory());
  for (int step = 0; step < kSteps; ++step) {
    expect_step_agrees(ref, ex, *cuda, step);
    ref.params().ops().sgd_keras(ref.params().values(), ref.params().grads(), ref_velocity.data(),
                                 count, 0.01, 0.9, false);
    ex.params().ops().sgd_keras(ex.params().values(), ex.params().grads(), velocity.data(), count,
                                0.01, 0.9, false);
  }
  for (size_t s = 0; s < ref.params().slots().size(); ++s)
    EXPECT_LT(test::rel_distance(test::HostCopy(cuda->memory(), ex.params().value(s)).view(),
                                 ref.params().value(s)),
              kBound)
        << ref.params().slots()[s].name << " after " << kSteps << " steps";
}

TEST(CudaGraphAgreement, CosmoFlow32TrainsAsTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  CosmoFlowOptions o;
  o.input_shape = {32, 32, 32, 4};
  o.conv_size = 4;
  expect_training_agrees(build_cosmoflow(o).graph, 2);
}

TEST(CudaGraphAgreement, SegmentationModelTrainsAsTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  expect_training_agrees(test::segmentation_model().graph, 2);
}

TEST(CudaGraphAgreement, BranchyAndPooling3dModelsTrainAsTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  expect_training_agrees(test::branchy_model().graph, 3);
  expect_training_agrees(test::pooling3d_model().graph, 2);
}

}  // namespace
}  // namespace crest
