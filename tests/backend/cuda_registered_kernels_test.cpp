// The cuda backend's registered kernels (channel_affine, channel_sum, expand and batch_norm,
// src/backends/cuda/*.cu) against the reference backend's of the same descriptor, pass by pass,
// in float32 on a GPU. Batch norm runs 1-D, 2-D and 3-D, with and without its fused ReLU, and
// with and without a BatchStatReducer (synchronised batch norm). Sizes are odd, and some cases
// give a channel more values than a block has threads, so the per-channel reductions loop.
// Channels-last batch norm and channel sums give the plain kernels' bits (the same values summed
// in the same order).
// Skipped where no device is usable: scripts/device-check.sh runs these on the GPU machine
// (docs/cuda.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "crest/backends/batch_norm_kernel.hpp"
#include "crest/backends/channel_affine_kernel.hpp"
#include "crest/backends/channel_sum_kernel.hpp"
#include "crest/backends/expand_kernel.hpp"
#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/core/tensor.hpp"
#include "support/kernel_format.hpp"
#include "support/mirrored_values.hpp"
#include "support/scoped_env.hpp"

namespace crest {
namespace {

using test::InKernelFormat;
using test::kTolerance;
using test::MirroredValues;

// Both copies of v's first `count` values set to `value`.
void fill(Backend& cuda, MirroredValues& v, size_t count, float value) {
  std::fill_n(v.ref(), count, value);
  cuda.memory().copy_to_device(v.dev(), v.ref(), count * sizeof(float));
}

// The message of the usage error a maker throws; "" when it made the kernel.
template <typename K>
std::string refusal(Backend& backend, const typename K::Desc& d) {
  try {
    make_kernel<K>(backend, d);
  } catch (const Error& e) {
    return e.kind() == ErrorKind::usage ? e.what() : "not a usage error: " + std::string(e.what());
  }
  return "";
}

TEST(CudaRegisteredKernels, ChannelAffineAgreesWithTheReferenceInEveryPass) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const int64_t spatial : {35, 301})
    for (const bool shift : {true, false}) {
      SCOPED_TRACE("spatial " + std::to_string(spatial) + (shift ? ", shift" : ", no shift"));
      const ChannelAffineDesc d{2, 3, spatial, shift, DType::f32};
      auto rk = make_kernel<ChannelAffineKernel>(*ref, d);
      auto ck = make_kernel<ChannelAffineKernel>(*cuda, d);
      const auto count = static_cast<size_t>(d.n * d.channels * d.spatial);
      MirroredValues x(*cuda, count, 1), scale(*cuda, 3, 2), bias(*cuda, 3, 3), y(*cuda, count, 0);
      MirroredValues dy(*cuda, count, 4), dx(*cuda, count, 0), dscale(*cuda, 3, 0),
          dshift(*cuda, 3, 0);
      rk->forward(x.ref(), scale.ref(), shift ? bias.ref() : nullptr, y.ref());
      ck->forward(x.dev(), scale.dev(), shift ? bias.dev() : nullptr, y.dev());
      EXPECT_LT(y.error(), kTolerance) << "forward";
      rk->backward_data(dy.ref(), scale.ref(), dx.ref());
      ck->backward_data(dy.dev(), scale.dev(), dx.dev());
      EXPECT_LT(dx.error(), kTolerance) << "backward data";
      rk->backward_weights(x.ref(), dy.ref(), dscale.ref(), shift ? dshift.ref() : nullptr);
      ck->backward_weights(x.dev(), dy.dev(), dscale.dev(), shift ? dshift.dev() : nullptr);
      EXPECT_LT(dscale.error(), kTolerance) << "scale gradient";
      EXPECT_LT(dshift.error(), kTolerance) << "shift gradient (untouched without a shift)";
    }
}

TEST(CudaRegisteredKernels, ChannelSumAgreesWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const Shape& shape :
       {Shape{2, 3, 5, 7}, Shape{2, 3, 3, 4, 5}, Shape{5, 3}, Shape{3, 2, 17, 19}}) {
    SCOPED_TRACE(shape.str());
    const ChannelSumDesc d{plain_format(shape, DType::f32)};
    auto rk = make_kernel<ChannelSumKernel>(*ref, d);
    auto ck = make_kernel<ChannelSumKernel>(*cuda, d);
    const auto channels = static_cast<size_t>(shape[1]);
    MirroredValues x(*cuda, static_cast<size_t>(shape.numel()), 5), sums(*cuda, channels, 0);
    rk->run(x.ref(), sums.ref());
    ck->run(x.dev(), sums.dev());
    EXPECT_LT(sums.error(), kTolerance);
    if (shape.rank() < 3) continue;
    const MemFormat channels_last = plain_format(shape, DType::f32, Layout::channels_last);
    auto cl = make_kernel<ChannelSumKernel>(*cuda, {channels_last});
    InKernelFormat xl(*cuda, channels_last);
    MirroredValues sums_cl(*cuda, channels, 0);
    cl->run(xl.in(x), sums_cl.dev());
    EXPECT_EQ(sums_cl.device_values(), sums.device_values()) << "channels-last";
  }
}

TEST(CudaRegisteredKernels, ExpandAgreesWithTheReferenceBothWays) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const int64_t spatial : {35, 1001}) {
    SCOPED_TRACE("spatial " + std::to_string(spatial));
    const ExpandDesc d{2, 3, spatial, DType::f32};
    auto rk = make_kernel<ExpandKernel>(*ref, d);
    auto ck = make_kernel<ExpandKernel>(*cuda, d);
    const auto count = static_cast<size_t>(d.n * d.channels * d.spatial);
    MirroredValues x(*cuda, 6, 6), y(*cuda, count, 0), dy(*cuda, count, 7), dx(*cuda, 6, 0);
    rk->forward(x.ref(), y.ref());
    ck->forward(x.dev(), y.dev());
    EXPECT_EQ(y.error(), 0) << "forward copies values";
    rk->backward(dy.ref(), dx.ref());
    ck->backward(dy.dev(), dx.dev());
    EXPECT_LT(dx.error(), kTolerance) << "backward";
  }
}

TEST(CudaRegisteredKernels, MakersRefuseWhatTheCudaBackendCannotRun) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  const std::string affine = refusal<ChannelAffineKernel>(*cuda, {2, 3, 5, true, DType::f64});
  EXPECT_NE(affine.find("channel_affine"), std::string::npos) << affine;
  EXPECT_NE(affine.find("f64"), std::string::npos) << affine;
  const std::string expand = refusal<ExpandKernel>(*cuda, {2, 3, 5, DType::f64});
  EXPECT_NE(expand.find("expand"), std::string::npos) << expand;
  // Mixed precision's 16-bit values are taken (the op table checks what they compute).
  EXPECT_EQ(refusal<ExpandKernel>(*cuda, {2, 3, 5, DType::bf16}), "");
  EXPECT_EQ(refusal<ChannelAffineKernel>(*cuda, {2, 3, 5, true, DType::f16}), "");
  const std::string sum =
      refusal<ChannelSumKernel>(*cuda, {plain_format(Shape{2, 3, 4, 5}, DType::f64)});
  EXPECT_NE(sum.find("channel_sum"), std::string::npos) << sum;
  BatchNormDesc bn;
  bn.dtype = DType::f64;
  const std::string wide = refusal<BatchNormKernel>(*cuda, bn);
  EXPECT_NE(wide.find("batch_norm"), std::string::npos) << wide;
  bn.dtype = DType::bf16;
  EXPECT_EQ(refusal<BatchNormKernel>(*cuda, bn), "");
  bn.dtype = DType::f32;
  bn.post_op = EltwiseDesc{EltwiseKind::tanh};
  EXPECT_NE(refusal<BatchNormKernel>(*cuda, bn).find("relu"), std::string::npos);
  bn.post_op = EltwiseDesc{EltwiseKind::relu};
  EXPECT_EQ(refusal<BatchNormKernel>(*cuda, bn), "");
}

// ---------------------------------------------------------------------------------------------
// Batch norm

// A group of two ranks with identical batches: every sum doubles, so the group's mean and
// variance equal one rank's, while the record of calls shows that the kernel went through it.
class TwoIdenticalRanks final : public BatchStatReducer {
 public:
  void allreduce_sum(double* data, size_t n) override {
    for (size_t i = 0; i < n; ++i) data[i] *= 2;
    sizes.push_back(n);
  }
  std::vector<size_t> sizes;  // of each call, in order
};

struct BatchNormCase {
  std::string name;
  BatchNormDesc d;
  bool synchronised;
};

BatchNormDesc batch_norm_desc(int64_t n, int64_t channels, std::vector<int64_t> size, bool relu) {
  BatchNormDesc d;
  d.spatial_rank = static_cast<int>(size.size());
  d.n = n;
  d.channels = channels;
  std::copy(size.begin(), size.end(), d.size.begin());
  if (relu) d.post_op = EltwiseDesc{EltwiseKind::relu};
  return d;
}

std::vector<BatchNormCase> batch_norm_cases() {
  const std::vector<std::pair<std::string, BatchNormDesc>> shapes{
      {"2d", batch_norm_desc(2, 3, {5, 7}, false)},
      {"3d", batch_norm_desc(2, 3, {3, 4, 5}, false)},
      {"2d_large", batch_norm_desc(3, 2, {17, 19}, false)}};
  std::vector<BatchNormCase> cases;
  for (const auto& [name, d] : shapes)
    for (const bool relu : {false, true})
      for (const bool synchronised : {false, true}) {
        BatchNormCase c{name, d, synchronised};
        if (relu) c.d.post_op = EltwiseDesc{EltwiseKind::relu};
        c.name += std::string(relu ? "_relu" : "") + (synchronised ? "_reducer" : "");
        cases.push_back(c);
      }
  return cases;
}

// A batch norm's tensors on both sides. The running statistics start as PyTorch's do (mean 0,
// variance 1, counter 0), so that their update is checked from sensible values.
struct BatchNormTensors {
  BatchNormTensors(Backend& cuda, const BatchNormDesc& d)
      : count(static_cast<size_t>(plain_size(d))),
        channels(static_cast<size_t>(d.channels)),
        src(cuda, count, 1),
        dst(cuda, count, 0),
        inferred(cuda, count, 0),
        diff_dst(cuda, count, 2),
        diff_src(cuda, count, 0),
        weight(cuda, channels, 3),
        bias(cuda, channels, 4),
        running_mean(cuda, channels, 0),
        running_var(cuda, channels, 0),
        counter(cuda, 1, 0),
        diff_weight(cuda, channels, 0),
        diff_bias(cuda, channels, 0) {
    fill(cuda, running_mean, channels, 0.f);
    fill(cuda, running_var, channels, 1.f);
    fill(cuda, counter, 1, 0.f);
  }

  static int64_t plain_size(const BatchNormDesc& d) {
    int64_t size = d.n * d.channels;
    for (int a = 0; a < d.spatial_rank; ++a) size *= d.size[static_cast<size_t>(a)];
    return size;
  }

  BatchNormParams ref_params() {
    return {weight.ref(), bias.ref(), running_mean.ref(), running_var.ref(), counter.ref()};
  }
  BatchNormParams dev_params() {
    return {weight.dev(), bias.dev(), running_mean.dev(), running_var.dev(), counter.dev()};
  }

  size_t count, channels;
  MirroredValues src, dst, inferred, diff_dst, diff_src, weight, bias, running_mean, running_var,
      counter, diff_weight, diff_bias;
};

// One side of a comparison: a backend's kernel with its workspace, scratch and reducer.
struct BatchNormSide {
  BatchNormSide(Backend& backend, const BatchNormDesc& d, bool synchronised)
      : kernel(make_kernel<BatchNormKernel>(backend, d)),
        workspace(kernel->workspace_bytes(), 256, backend.memory()),
        scratch(kernel->scratch_bytes(), 256, backend.memory()),
        reducer(synchronised ? &group : nullptr) {}

  std::unique_ptr<BatchNormKernel> kernel;
  Buffer workspace, scratch;
  TwoIdenticalRanks group;
  BatchStatReducer* reducer;
};

void expect_training_forward_agrees(BatchNormSide& r, BatchNormSide& c, BatchNormTensors& t) {
  r.kernel->forward_training(t.src.ref(), t.ref_params(), t.dst.ref(), r.workspace.data(),
                             r.scratch.data(), r.reducer);
  c.kernel->forward_training(t.src.dev(), t.dev_params(), t.dst.dev(), c.workspace.data(),
                             c.scratch.data(), c.reducer);
  EXPECT_LT(t.dst.error(), kTolerance) << "training forward";
  EXPECT_LT(t.running_mean.error(), kTolerance) << "running mean";
  EXPECT_LT(t.running_var.error(), kTolerance) << "running variance";
  EXPECT_EQ(t.counter.error(), 0) << "num_batches_tracked";
  EXPECT_EQ(t.counter.device_values(), std::vector<float>{1.f}) << "num_batches_tracked";
}

// After the training forward, so that the running statistics are not the trivial ones.
void expect_inference_agrees(BatchNormSide& r, BatchNormSide& c, BatchNormTensors& t) {
  r.kernel->forward_inference(t.src.ref(), t.ref_params(), t.inferred.ref(), r.scratch.data());
  c.kernel->forward_inference(t.src.dev(), t.dev_params(), t.inferred.dev(), c.scratch.data());
  EXPECT_LT(t.inferred.error(), kTolerance) << "inference forward";
  EXPECT_LT(t.running_mean.error(), kTolerance) << "inference changes no running statistic";
  EXPECT_EQ(t.counter.device_values(), std::vector<float>{1.f}) << "nor the counter";
}

void expect_backward_agrees(BatchNormSide& r, BatchNormSide& c, BatchNormTensors& t,
                            bool input_grad) {
  r.kernel->backward(t.src.ref(), t.diff_dst.ref(), t.ref_params(), r.workspace.data(),
                     input_grad ? t.diff_src.ref() : nullptr, t.diff_weight.ref(),
                     t.diff_bias.ref(), r.scratch.data(), r.reducer);
  c.kernel->backward(t.src.dev(), t.diff_dst.dev(), t.dev_params(), c.workspace.data(),
                     input_grad ? t.diff_src.dev() : nullptr, t.diff_weight.dev(),
                     t.diff_bias.dev(), c.scratch.data(), c.reducer);
  EXPECT_LT(t.diff_src.error(), kTolerance) << "input gradient";
  EXPECT_LT(t.diff_weight.error(), kTolerance) << "weight gradient";
  EXPECT_LT(t.diff_bias.error(), kTolerance) << "bias gradient";
}

TEST(CudaRegisteredKernels, BatchNormAgreesWithTheReferenceInEveryPass) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const BatchNormCase& bc : batch_norm_cases()) {
    SCOPED_TRACE(bc.name);
    BatchNormSide r(*ref, bc.d, bc.synchronised), c(*cuda, bc.d, bc.synchronised);
    ASSERT_EQ(c.kernel->format(), r.kernel->format());
    EXPECT_EQ(c.kernel->backward_applies_post_op(), r.kernel->backward_applies_post_op());
    BatchNormTensors t(*cuda, bc.d);
    expect_training_forward_agrees(r, c, t);
    expect_inference_agrees(r, c, t);
    expect_backward_agrees(r, c, t, true);
    if (!bc.synchronised) continue;
    // Two calls in the training forward (the sums of x with the count, then the squared
    // deviations), one in backward (the sums of dy and dy * x_hat); none in inference.
    const size_t channels = t.channels;
    EXPECT_EQ(c.group.sizes, (std::vector<size_t>{channels + 1, channels, 2 * channels}));
    EXPECT_EQ(c.group.sizes, r.group.sizes);
  }
}

// 1-D, without an input gradient: backward leaves diff_src alone, still writes the parameter
// gradients and, synchronised, still makes its call (every rank of a group makes the same ones).
TEST(CudaRegisteredKernels, BatchNormWithoutAnInputGradientAgreesWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const bool synchronised : {false, true}) {
    SCOPED_TRACE(synchronised ? "synchronised" : "local");
    BatchNormDesc d = batch_norm_desc(4, 3, {9}, true);
    d.input_grad = false;
    BatchNormSide r(*ref, d, synchronised), c(*cuda, d, synchronised);
    BatchNormTensors t(*cuda, d);
    expect_training_forward_agrees(r, c, t);
    expect_backward_agrees(r, c, t, false);
    EXPECT_EQ(c.group.sizes, r.group.sizes);
    EXPECT_EQ(c.group.sizes.size(), synchronised ? 3u : 0u);
  }
}

// Fed channels-last values (CREST_CUDA_LAYOUT=channels_last: float32 would follow them only under
// TF32), batch norm computes channels-last, and every pass (the training forward with the running
// statistics, inference, backward) gives the plain kernel's bits, alone and synchronised.
TEST(CudaRegisteredKernels, ChannelsLastBatchNormGivesThePlainBits) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto plain = make_backend("cuda");
  const test::ScopedEnv forced("CREST_CUDA_LAYOUT", "channels_last");
  auto cuda = make_backend("cuda");
  for (const BatchNormCase& bc : batch_norm_cases()) {
    SCOPED_TRACE(bc.name);
    BatchNormDesc cl = bc.d;
    cl.src_hint = plain_format(Shape{1, 1, 1}, DType::f32, Layout::channels_last);
    BatchNormSide p(*plain, bc.d, bc.synchronised), c(*cuda, cl, bc.synchronised);
    ASSERT_EQ(p.kernel->format().layout, Layout::plain);
    ASSERT_EQ(c.kernel->format().layout, Layout::channels_last);
    BatchNormTensors tp(*plain, bc.d), tc(*cuda, bc.d);
    InKernelFormat x(*cuda, c.kernel->format()), y(*cuda, c.kernel->format()),
        inferred(*cuda, c.kernel->format()), dy(*cuda, c.kernel->format()),
        dx(*cuda, c.kernel->format());
    p.kernel->forward_training(tp.src.dev(), tp.dev_params(), tp.dst.dev(), p.workspace.data(),
                               p.scratch.data(), p.reducer);
    c.kernel->forward_training(x.in(tc.src), tc.dev_params(), y.out(tc.dst), c.workspace.data(),
                               c.scratch.data(), c.reducer);
    y.back(tc.dst);
    p.kernel->forward_inference(tp.src.dev(), tp.dev_params(), tp.inferred.dev(), p.scratch.data());
    c.kernel->forward_inference(x.in(tc.src), tc.dev_params(), inferred.out(tc.inferred),
                                c.scratch.data());
    inferred.back(tc.inferred);
    p.kernel->backward(tp.src.dev(), tp.diff_dst.dev(), tp.dev_params(), p.workspace.data(),
                       tp.diff_src.dev(), tp.diff_weight.dev(), tp.diff_bias.dev(),
                       p.scratch.data(), p.reducer);
    c.kernel->backward(x.in(tc.src), dy.in(tc.diff_dst), tc.dev_params(), c.workspace.data(),
                       dx.out(tc.diff_src), tc.diff_weight.dev(), tc.diff_bias.dev(),
                       c.scratch.data(), c.reducer);
    dx.back(tc.diff_src);
    for (const auto& [name, from_plain, from_channels_last] :
         {std::tuple{"training forward", &tp.dst, &tc.dst},
          std::tuple{"running mean", &tp.running_mean, &tc.running_mean},
          std::tuple{"running variance", &tp.running_var, &tc.running_var},
          std::tuple{"inference forward", &tp.inferred, &tc.inferred},
          std::tuple{"input gradient", &tp.diff_src, &tc.diff_src},
          std::tuple{"weight gradient", &tp.diff_weight, &tc.diff_weight},
          std::tuple{"bias gradient", &tp.diff_bias, &tc.diff_bias}})
      EXPECT_EQ(from_channels_last->device_values(), from_plain->device_values()) << name;
    EXPECT_EQ(c.group.sizes, p.group.sizes);
  }
}

}  // namespace
}  // namespace crest
