// The CUDA backend's vector ops against the reference backend's, on a GPU: the element-wise
// family, the reductions (which must be in a fixed order: the same inputs, the same bits), the
// losses, dropout (the same mask as the CPU backends), the optimizer updates and the 16-bit
// conversions. Skipped where no device is usable (docs/cuda.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "support/mirrored_values.hpp"

namespace crest {
namespace {

using test::kTolerance;
using test::MirroredValues;

constexpr size_t kCount = 1000;  // past one block of threads, not a multiple of it

struct Ops {
  std::unique_ptr<Backend> cuda = make_backend("cuda");
  std::unique_ptr<Backend> ref = make_backend("reference");
  std::unique_ptr<VectorOps> c = cuda->vector_ops(DType::f32);
  std::unique_ptr<VectorOps> r = ref->vector_ops(DType::f32);
};

// An update's step values on the device (what Optimizer::stage_update writes there) and on the
// host, the same.
struct UpdateStepOn {
  UpdateStepOn(Backend& cuda, const VectorOps::UpdateStep& values)
      : host(values), buffer(sizeof values, 256, cuda.memory()) {
    cuda.memory().copy_to_device(buffer.data(), &values, sizeof values);
  }
  const VectorOps::UpdateStep* device() const {
    return static_cast<const VectorOps::UpdateStep*>(buffer.data());
  }
  VectorOps::UpdateStep host;
  Buffer buffer;
};

TEST(CudaVectorOps, ElementWiseOpsAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues a(*o.cuda, kCount, 1), b(*o.cuda, kCount, 2), y(*o.cuda, kCount, 3);
  o.r->add(a.ref(), b.ref(), y.ref(), kCount);
  o.c->add(a.dev(), b.dev(), y.dev(), kCount);
  EXPECT_EQ(y.error(), 0) << "add";
  o.r->axpy(0.3, a.ref(), y.ref(), kCount);
  o.c->axpy(0.3, a.dev(), y.dev(), kCount);
  EXPECT_LT(y.error(), kTolerance) << "axpy";
  o.r->scale(-1.5, y.ref(), y.ref(), kCount);
  o.c->scale(-1.5, y.dev(), y.dev(), kCount);
  EXPECT_LT(y.error(), kTolerance) << "scale in place";
  o.r->copy(b.ref(), y.ref(), kCount);
  o.c->copy(b.dev(), y.dev(), kCount);
  EXPECT_EQ(y.error(), 0) << "copy";
  o.r->fill(y.ref(), kCount, 0.37);
  o.c->fill(y.dev(), kCount, 0.37);
  EXPECT_EQ(y.error(), 0) << "fill";
  o.r->dropout(a.ref(), y.ref(), kCount, 0.3f, 42);
  o.c->dropout(a.dev(), y.dev(), kCount, 0.3f, 42);
  const std::vector<float> got = y.device_values();
  for (size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(got[i] == 0.f, y.ref()[i] == 0.f) << "the dropout mask differs at " << i;
  EXPECT_LT(y.error(), kTolerance) << "dropout";
}

TEST(CudaVectorOps, TheLagCorrectionAgreesWithTheReferenceBitForBit) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  for (bool replace_share : {true, false}) {
    MirroredValues g(*o.cuda, kCount, 4), avg(*o.cuda, kCount, 5), prev(*o.cuda, kCount, 6);
    MirroredValues sent(*o.cuda, kCount, 7);
    o.r->lag_correction(g.ref(), avg.ref(), prev.ref(), sent.ref(), kCount, 0.3, replace_share);
    o.c->lag_correction(g.dev(), avg.dev(), prev.dev(), sent.dev(), kCount, 0.3, replace_share);
    EXPECT_EQ(g.error(), 0) << "the update, replace " << replace_share;
    EXPECT_EQ(prev.error(), 0) << "the own previous gradient";
    EXPECT_EQ(sent.error(), 0) << "the gradient sent";
  }
}

TEST(CudaVectorOps, ReductionsAgreeAndRepeatBitForBit) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues a(*o.cuda, kCount, 1), b(*o.cuda, kCount, 2);
  const double want = o.r->sum_squares(a.ref(), kCount);
  const double got = o.c->sum_squares(a.dev(), kCount);
  EXPECT_NEAR(got, want, 1e-9 * want);
  EXPECT_EQ(o.c->sum_squares(a.dev(), kCount), got) << "a second run gives other bits";
  const ElementRange ranges[] = {{0, 10}, {10, 490}, {500, 500}};
  double ra[3], rb[3], ca[3], cb[3];
  o.r->range_sum_squares(a.ref(), b.ref(), ranges, 3, ra, rb);
  o.c->range_sum_squares(a.dev(), b.dev(), ranges, 3, ca, cb);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(ca[i], ra[i], 1e-9 * ra[i]) << "range " << i;
    EXPECT_NEAR(cb[i], rb[i], 1e-9 * rb[i]) << "range " << i;
  }
  MirroredValues diff(*o.cuda, kCount, 0);
  const double rl = o.r->mse(a.ref(), b.ref(), diff.ref(), kCount, 2.0);
  const double cl = o.c->mse(a.dev(), b.dev(), diff.dev(), kCount, 2.0);
  EXPECT_NEAR(cl, rl, 1e-9 * rl) << "mse";
  EXPECT_LT(diff.error(), kTolerance) << "mse gradient";
}

TEST(CudaVectorOps, SoftmaxCrossEntropyAgreesWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  const int64_t n = 2, classes = 3, spatial = 50;
  const size_t count = static_cast<size_t>(n * classes * spatial);
  MirroredValues logits(*o.cuda, count, 4), diff(*o.cuda, count, 0);
  std::vector<int32_t> labels(static_cast<size_t>(n * spatial));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 7) % 3);
  Buffer device_labels(labels.size() * 4, 256, o.cuda->memory());
  o.cuda->memory().copy_to_device(device_labels.data(), labels.data(), labels.size() * 4);
  // Class weights are positive, as a loss's are.
  std::vector<float> w{0.5f, 1.f, 2.f};
  Buffer device_weights(12, 256, o.cuda->memory());
  o.cuda->memory().copy_to_device(device_weights.data(), w.data(), 12);
  const double rl = o.r->softmax_cross_entropy(logits.ref(), labels.data(), w.data(), 0.0,
                                               diff.ref(), n, classes, spatial, 1.0);
  const double cl = o.c->softmax_cross_entropy(
      logits.dev(), static_cast<const int32_t*>(device_labels.data()),
      static_cast<const float*>(device_weights.data()), 0.0, diff.dev(), n, classes, spatial, 1.0);
  EXPECT_NEAR(cl, rl, 1e-6 * rl);
  EXPECT_LT(diff.error(), kTolerance);
  // Label smoothing (no class weights).
  const double rs = o.r->softmax_cross_entropy(logits.ref(), labels.data(), nullptr, 0.1,
                                               diff.ref(), n, classes, spatial, 1.0);
  const double cs =
      o.c->softmax_cross_entropy(logits.dev(), static_cast<const int32_t*>(device_labels.data()),
                                 nullptr, 0.1, diff.dev(), n, classes, spatial, 1.0);
  EXPECT_NEAR(cs, rs, 1e-6 * rs) << "label smoothing";
  EXPECT_LT(diff.error(), kTolerance) << "label smoothing";
}

TEST(CudaVectorOps, OptimizerUpdatesAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues w(*o.cuda, kCount, 1), g(*o.cuda, kCount, 2), m(*o.cuda, kCount, 3),
      v(*o.cuda, kCount, 4);
  for (bool nesterov : {false, true}) {
    o.r->sgd_keras(w.ref(), g.ref(), m.ref(), kCount, 0.01, 0.9, nesterov);
    o.c->sgd_keras(w.dev(), g.dev(), m.dev(), kCount, 0.01, 0.9, nesterov);
    EXPECT_LT(w.error(), kTolerance) << "sgd, nesterov " << nesterov;
    EXPECT_LT(m.error(), kTolerance) << "sgd velocity, nesterov " << nesterov;
  }
  // A positive second moment, as Adam's always is.
  o.r->fill(v.ref(), kCount, 0.25);
  o.c->fill(v.dev(), kCount, 0.25);
  for (bool decoupled : {false, true}) {
    o.r->adam(w.ref(), g.ref(), m.ref(), v.ref(), kCount, 1e-3, 0.9, 0.999, 1e-8, 0.01, decoupled,
              3);
    o.c->adam(w.dev(), g.dev(), m.dev(), v.dev(), kCount, 1e-3, 0.9, 0.999, 1e-8, 0.01, decoupled,
              3);
    EXPECT_LT(w.error(), kTolerance) << "adam, decoupled " << decoupled;
    EXPECT_LT(v.error(), kTolerance) << "adam second moment";
  }
  o.r->lars_update(w.ref(), g.ref(), m.ref(), kCount, 0.1, 0.9, 0.7, 5e-5);
  o.c->lars_update(w.dev(), g.dev(), m.dev(), kCount, 0.1, 0.9, 0.7, 5e-5);
  EXPECT_LT(w.error(), kTolerance) << "lars";
  const auto rn = o.r->lamb_direction_with_norms(w.ref(), g.ref(), m.ref(), v.ref(), kCount, 1.5,
                                                 0.9, 0.999, 1e-6, 0.01, 2);
  const auto cn = o.c->lamb_direction_with_norms(w.dev(), g.dev(), m.dev(), v.dev(), kCount, 1.5,
                                                 0.9, 0.999, 1e-6, 0.01, 2);
  EXPECT_LT(g.error(), kTolerance) << "lamb direction";
  EXPECT_NEAR(cn.w, rn.w, 1e-9 * rn.w);
  EXPECT_NEAR(cn.u, rn.u, 1e-6 * rn.u);
}

// Doubles in device memory, read back after the stream's work.
std::vector<double> device_doubles(Backend& cuda, const Buffer& b, size_t n) {
  std::vector<double> out(n);
  cuda.stream().synchronize();
  cuda.memory().copy_to_host(out.data(), b.data(), n * sizeof(double));
  return out;
}

// The values a step leaves on the device for its one read (widen_into, sum_squares_into,
// mse_into, fill_from, flag_nonfinite): the reference's.
TEST(CudaVectorOps, StepValuesLeftOnTheDeviceAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues a(*o.cuda, kCount, 1), b(*o.cuda, kCount, 2), one(*o.cuda, 1, 0);
  Buffer values(8 * sizeof(double), 256, o.cuda->memory());
  auto* at = static_cast<double*>(values.data());
  double want[8] = {};
  o.c->widen_into(a.dev(), 3, at);
  o.r->widen_into(a.ref(), 3, want);
  o.c->sum_squares_into(a.dev(), kCount, at + 3);
  o.r->sum_squares_into(a.ref(), kCount, want + 3);
  o.c->mse_into(a.dev(), b.dev(), kCount, at + 4);
  o.r->mse_into(a.ref(), b.ref(), kCount, want + 4);
  const std::vector<double> got = device_doubles(*o.cuda, values, 5);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], want[i]) << "widen_into " << i;
  EXPECT_NEAR(got[3], want[3], 1e-9 * want[3]) << "sum_squares_into";
  EXPECT_NEAR(got[4], want[4], 1e-9 * want[4]) << "mse_into";
  o.c->fill_from(one.dev(), at + 4, 0.5);
  o.r->fill_from(one.ref(), want + 4, 0.5);
  EXPECT_LT(one.error(), kTolerance) << "fill_from";
  o.c->fill(one.dev(), 1, 0.0);
  o.c->flag_nonfinite(at, 5, one.dev());
  EXPECT_EQ(one.device_values()[0], 0.f) << "flag_nonfinite raised a flag for finite values";
  const double infinity = std::numeric_limits<double>::infinity();
  o.cuda->memory().copy_to_device(at + 2, &infinity, sizeof(double));
  o.c->flag_nonfinite(at, 5, one.dev());
  EXPECT_EQ(one.device_values()[0], 1.f) << "flag_nonfinite missed an infinity";
}

// Dropout whose seed the kernel draws from the step counter in device memory (dropout_at_step),
// the counter set and advanced there: the mask the reference draws with dropout_seed at that step.
TEST(CudaVectorOps, DropoutFromTheStepCounterAgreesWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues a(*o.cuda, kCount, 1), y(*o.cuda, kCount, 2);
  Buffer counter(sizeof(uint64_t), 256, o.cuda->memory());
  auto* step = static_cast<uint64_t*>(counter.data());
  o.c->set_counter(step, 41);
  for (const uint64_t at : {41u, 42u}) {
    o.c->dropout_at_step(a.dev(), y.dev(), kCount - 7, 0.3f, {9, 3, step}, 7);
    o.r->dropout_at(a.ref(), y.ref(), kCount - 7, 0.3f, dropout_seed(9, at, 3), 7);
    const std::vector<float> got = y.device_values();
    for (size_t i = 0; i < kCount - 7; ++i)
      ASSERT_EQ(got[i] == 0.f, y.ref()[i] == 0.f) << "step " << at << ": the mask differs at " << i;
    EXPECT_LT(y.error(), kTolerance) << "step " << at;
    o.c->increment_counter(step);
  }
  uint64_t last = 0;
  o.cuda->stream().synchronize();
  o.cuda->memory().copy_to_host(&last, step, sizeof last);
  EXPECT_EQ(last, 43u);
}

// LARS's and LARC's updates with the ratio computed on the device from norms left there
// (range_sum_squares_into): the reference's updates from the same norms on the host.
TEST(CudaVectorOps, TrustRatioUpdatesAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues w(*o.cuda, kCount, 1), g(*o.cuda, kCount, 2), m(*o.cuda, kCount, 3);
  const ElementRange ranges[] = {{0, 10}, {10, 490}, {500, 500}};
  Buffer sums(6 * sizeof(double), 256, o.cuda->memory());
  auto* at = static_cast<double*>(sums.data());
  double want[6];
  o.c->range_sum_squares_into(w.dev(), g.dev(), ranges, 3, at);
  o.r->range_sum_squares_into(w.ref(), g.ref(), ranges, 3, want);
  const std::vector<double> got = device_doubles(*o.cuda, sums, 6);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got[i], want[i], 1e-9 * want[i]) << "sum " << i;
  // The host's sums are the device's, so both compute the same ratios from here on.
  std::memcpy(want, got.data(), sizeof want);
  const UpdateStepOn rate(*o.cuda, {.lr = 0.1}), larc_rate(*o.cuda, {.lr = 0.5});
  for (int r = 0; r < 3; ++r) {
    const VectorOps::TrustRatioAt on_device{at + r, at + 3 + r, 0.02, 0.01, 1e-9};
    const VectorOps::TrustRatioAt on_host{want + r, want + 3 + r, 0.02, 0.01, 1e-9};
    const size_t first = ranges[r].offset, n = ranges[r].count;
    auto* wd = static_cast<float*>(w.dev()) + first;
    auto* gd = static_cast<float*>(g.dev()) + first;
    auto* md = static_cast<float*>(m.dev()) + first;
    o.c->lars_trust_update(wd, gd, md, n, rate.device(), 0.9, on_device);
    o.r->lars_trust_update(w.ref() + first, g.ref() + first, m.ref() + first, n, &rate.host, 0.9,
                           on_host);
    o.c->sgd_keras_trust_update(wd, gd, md, n, rate.device(), 0.9, on_device);
    o.r->sgd_keras_trust_update(w.ref() + first, g.ref() + first, m.ref() + first, n, &rate.host,
                                0.9, on_host);
    for (const bool clip : {true, false}) {
      o.c->larc_trust_rescale(gd, wd, n, on_device, clip, larc_rate.device());
      o.r->larc_trust_rescale(g.ref() + first, w.ref() + first, n, on_host, clip, &larc_rate.host);
    }
  }
  EXPECT_LT(w.error(), kTolerance) << "weights";
  EXPECT_LT(g.error(), kTolerance) << "gradients (Keras's decay, LARC's rescaling)";
  EXPECT_LT(m.error(), kTolerance) << "momentum";
}

// The updates that read the step's rate, count and LAMB's divisor from device memory
// (VectorOps::UpdateStep, written once per step by the optimizer): the reference's updates with
// the same values on the host.
TEST(CudaVectorOps, UpdatesAtTheStepInDeviceMemoryAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues w(*o.cuda, kCount, 1), g(*o.cuda, kCount, 2), m(*o.cuda, kCount, 3),
      v(*o.cuda, kCount, 4);
  const UpdateStepOn at(*o.cuda, {.lr = 0.02, .grad_divisor = 1.5, .step = 3});
  for (const bool nesterov : {false, true}) {
    o.r->sgd_keras_at_step(w.ref(), g.ref(), m.ref(), kCount, &at.host, 0.9, nesterov);
    o.c->sgd_keras_at_step(w.dev(), g.dev(), m.dev(), kCount, at.device(), 0.9, nesterov);
    EXPECT_LT(w.error(), kTolerance) << "sgd, nesterov " << nesterov;
  }
  for (const bool decoupled : {false, true}) {
    o.r->adam_at_step(w.ref(), g.ref(), m.ref(), v.ref(), kCount, &at.host, 0.9, 0.999, 1e-8, 0.01,
                      decoupled);
    o.c->adam_at_step(w.dev(), g.dev(), m.dev(), v.dev(), kCount, at.device(), 0.9, 0.999, 1e-8,
                      0.01, decoupled);
    EXPECT_LT(w.error(), kTolerance) << "adam (step 3's bias correction), decoupled " << decoupled;
    EXPECT_LT(m.error(), kTolerance) << "adam first moment";
  }
  o.r->lars_update_at_step(w.ref(), g.ref(), m.ref(), kCount, &at.host, 0.9, 0.7, 5e-5);
  o.c->lars_update_at_step(w.dev(), g.dev(), m.dev(), kCount, at.device(), 0.9, 0.7, 5e-5);
  EXPECT_LT(w.error(), kTolerance) << "lars";
  o.r->lamb_direction_at_step(w.ref(), g.ref(), m.ref(), v.ref(), kCount, &at.host, 0.9, 0.999,
                              1e-6, 0.0);
  o.c->lamb_direction_at_step(w.dev(), g.dev(), m.dev(), v.dev(), kCount, at.device(), 0.9, 0.999,
                              1e-6, 0.0);
  EXPECT_LT(g.error(), kTolerance) << "lamb direction (the divisor, step 3's bias correction)";
  o.r->lamb_trust_update(w.ref(), g.ref(), kCount, &at.host, nullptr);
  o.c->lamb_trust_update(w.dev(), g.dev(), kCount, at.device(), nullptr);
  EXPECT_LT(w.error(), kTolerance) << "lamb without a trust ratio";
  Buffer sums(2 * sizeof(double), 256, o.cuda->memory());
  double want[2];
  o.r->lamb_direction_with_norms_into(w.ref(), g.ref(), m.ref(), v.ref(), kCount, &at.host, 0.9,
                                      0.999, 1e-6, 0.01, want);
  o.c->lamb_direction_with_norms_into(w.dev(), g.dev(), m.dev(), v.dev(), kCount, at.device(), 0.9,
                                      0.999, 1e-6, 0.01, static_cast<double*>(sums.data()));
  const std::vector<double> got = device_doubles(*o.cuda, sums, 2);
  EXPECT_NEAR(got[0], want[0], 1e-6 * want[0]) << "lamb: the sum of w^2";
  EXPECT_NEAR(got[1], want[1], 1e-5 * want[1]) << "lamb: the sum of u^2";
  o.r->lamb_trust_update(w.ref(), g.ref(), kCount, &at.host, want);
  o.c->lamb_trust_update(w.dev(), g.dev(), kCount, at.device(), static_cast<double*>(sums.data()));
  EXPECT_LT(w.error(), kTolerance) << "lamb with its trust ratio";
}

TEST(CudaVectorOps, SixteenBitConversionsAreExact) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  Ops o;
  MirroredValues x(*o.cuda, kCount, 6);
  for (DType to : {DType::bf16, DType::f16}) {
    std::vector<uint16_t> want(kCount), got(kCount);
    const double rmax = o.r->narrow(x.ref(), 3.0, want.data(), kCount, to);
    Buffer codes(kCount * 2, 256, o.cuda->memory());
    const double cmax = o.c->narrow(x.dev(), 3.0, codes.data(), kCount, to);
    o.cuda->memory().copy_to_host(got.data(), codes.data(), kCount * 2);
    EXPECT_EQ(cmax, rmax);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), kCount * 2), 0) << dtype_name(to);
    MirroredValues wide(*o.cuda, kCount, 0);
    o.r->widen(want.data(), to, wide.ref(), kCount);
    o.c->widen(codes.data(), to, wide.dev(), kCount);
    EXPECT_EQ(wide.error(), 0) << dtype_name(to);
  }
}

}  // namespace
}  // namespace crest
