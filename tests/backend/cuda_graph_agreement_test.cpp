// Whole networks on the CUDA backend against the reference backend, on a GPU: the same graph,
// weights and batch; the loss, every parameter gradient, and the weights after three steps of
// SGD with momentum (each backend's own optimizer kernel) agree within 1e-4 in float32, and
// under mixed precision (bf16, fp16: cuDNN and cuBLAS on the tensor cores against the
// reference's emulation of 16-bit kernels) within a bound of a few of the type's roundings
// carried through the network. Under mixed precision CosmoFlow's channels-last batch makes its
// kernels compute channels-last; float32 and the other models' plain inputs keep theirs plain,
// unless CREST_CUDA_LAYOUT says otherwise. Tensors go in and
// come out through the backend's memory resource (test::write_host, test::HostCopy). Skipped
// where no device is usable (scripts/device-check.sh runs it on the GPU machine).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "support/host_copy.hpp"
#include "support/mirrored_values.hpp"
#include "support/scoped_env.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

constexpr double kBound = 1e-4;  // relative (max error over 1 + max magnitude)
constexpr int kSteps = 3;

// Mixed precision: the type and its bound. A 16-bit activation may round to the neighbouring
// value (bf16 2^-8, fp16 2^-11 relative) wherever the two accumulation orders differ, and cuDNN
// rounds a convolution's weight gradient to the 16-bit type (the reference keeps it float32).
struct Precision {
  std::optional<DType> half;
  double bound;
};
constexpr Precision kFloat32{std::nullopt, kBound};
const Precision kHalves[] = {{DType::bf16, 2e-2}, {DType::f16, 4e-3}};

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
void expect_step_agrees(Executor& ref, Executor& ex, Backend& backend, int step, double bound) {
  const double want = ref.forward(), got = ex.forward();
  EXPECT_NEAR(got, want, bound * (1 + std::abs(want))) << "loss, step " << step;
  ref.backward();
  ex.backward();
  for (size_t s = 0; s < ref.params().slots().size(); ++s)
    EXPECT_LT(test::rel_distance(test::HostCopy(backend.memory(), ex.params().grad(s)).view(),
                                 ref.params().grad(s)),
              bound)
        << ref.params().slots()[s].name << " gradient, step " << step;
}

void expect_training_agrees(const Graph& g, int64_t batch, const Precision& precision = kFloat32) {
  auto reference = make_backend("reference");
  auto cuda = make_backend("cuda");
  SCOPED_TRACE(precision.half ? dtype_name(*precision.half) : "f32");
  if (precision.half && !cuda->supports(*precision.half)) {
    ADD_FAILURE() << cuda->supports_dtype(*precision.half).reason;
    return;
  }
  CompileOptions o;
  o.batch = batch;
  o.seed = 9;
  o.half = precision.half;
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
    expect_step_agrees(ref, ex, *cuda, step, precision.bound);
    ref.params().ops().sgd_keras(ref.params().values(), ref.params().grads(), ref_velocity.data(),
                                 count, 0.01, 0.9, false);
    ex.params().ops().sgd_keras(ex.params().values(), ex.params().grads(), velocity.data(), count,
                                0.01, 0.9, false);
  }
  for (size_t s = 0; s < ref.params().slots().size(); ++s)
    EXPECT_LT(test::rel_distance(test::HostCopy(cuda->memory(), ex.params().value(s)).view(),
                                 ref.params().value(s)),
              precision.bound)
        << ref.params().slots()[s].name << " after " << kSteps << " steps";
}

CosmoFlowOptions cosmoflow32() {
  CosmoFlowOptions o;
  o.input_shape = {32, 32, 32, 4};
  o.conv_size = 4;
  return o;
}

TEST(CudaGraphAgreement, CosmoFlow32TrainsAsTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  expect_training_agrees(build_cosmoflow(cosmoflow32()).graph, 2);
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

// CREST_CUDA_TF32=1: float32 convolutions and products on the tensor cores, each operand rounded
// to TF32's 10 mantissa bits (fp16's precision), so fp16's bound; a value other than 0 or 1 is
// refused naming the variable.
TEST(CudaGraphAgreement, Tf32TrainsAsTheReferenceWithinItsRounding) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  {
    const test::ScopedEnv tf32("CREST_CUDA_TF32", "1");
    const Precision tf32_bound{std::nullopt, 4e-3};
    expect_training_agrees(build_cosmoflow(cosmoflow32()).graph, 2, tf32_bound);
    expect_training_agrees(test::segmentation_model().graph, 2, tf32_bound);
  }
  const test::ScopedEnv wrong("CREST_CUDA_TF32", "yes");
  try {
    make_backend("cuda");
    ADD_FAILURE() << "CREST_CUDA_TF32=yes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CREST_CUDA_TF32"), std::string::npos) << e.what();
  }
}

// Every kernel that can made channels-last (CREST_CUDA_LAYOUT=channels_last: reorders where a
// plain producer meets it) in float32 and bf16, then bf16 CosmoFlow with every kernel plain (the
// one model whose kernels follow its channels-last batch by default): the layouts change how
// cuDNN computes, not what.
TEST(CudaGraphAgreement, EveryLayoutTrainsAsTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  {
    const test::ScopedEnv forced("CREST_CUDA_LAYOUT", "channels_last");
    SCOPED_TRACE("channels_last");
    for (const Precision& p : {kFloat32, kHalves[0]}) {
      expect_training_agrees(build_cosmoflow(cosmoflow32()).graph, 2, p);
      expect_training_agrees(test::segmentation_model().graph, 2, p);
      expect_training_agrees(test::branchy_model().graph, 3, p);
      expect_training_agrees(test::pooling3d_model().graph, 2, p);
    }
  }
  const test::ScopedEnv forced("CREST_CUDA_LAYOUT", "plain");
  SCOPED_TRACE("plain");
  expect_training_agrees(build_cosmoflow(cosmoflow32()).graph, 2, kHalves[0]);
}

// Mixed precision: every layer but the loss computes in the 16-bit type on the device.
TEST(CudaGraphAgreement, MixedPrecisionTrainsAsTheReferencesEmulation) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  for (const Precision& p : kHalves) {
    expect_training_agrees(build_cosmoflow(cosmoflow32()).graph, 2, p);
    expect_training_agrees(test::segmentation_model().graph, 2, p);
    expect_training_agrees(test::branchy_model().graph, 3, p);
    expect_training_agrees(test::pooling3d_model().graph, 2, p);
  }
}

}  // namespace
}  // namespace crest
