// The onednn batch-norm kernel against the reference kernel on the layouts a producer delivers
// (plain, channels-last, blocked with padded channels), with and without the fused ReLU, local
// and synchronised over two in-process ranks (the kernel's group correction runs in the blocked
// layout), in training and inference.
#include <gtest/gtest.h>

#include <thread>

#include "backend/backend_test_util.hpp"
#include "crest/backends/batch_norm_kernel.hpp"
#include "support/lockstep_reducer.hpp"

namespace crest {
namespace {

using testing::expect_close;
using testing::FormattedBuffer;
using testing::onednn_conv_format;
using testing::random_floats;

BatchNormDesc desc(const Shape& shape, const MemFormat& hint, bool relu) {
  BatchNormDesc d;
  d.spatial_rank = shape.rank() - 2;
  d.n = shape[0];
  d.channels = shape[1];
  for (int i = 0; i < d.spatial_rank; ++i) d.size[static_cast<size_t>(i)] = shape[2 + i];
  if (relu) d.post_op = {EltwiseKind::relu, 0.f, 0.f};
  d.src_hint = hint;
  return d;
}

// Per-channel parameters and state of one kernel, plain f32.
struct Params {
  explicit Params(int64_t c)
      : weight(random_floats(static_cast<size_t>(c), 1, 0.5f, 1.5f)),
        bias(random_floats(static_cast<size_t>(c), 2)),
        mean(random_floats(static_cast<size_t>(c), 3)),
        var(random_floats(static_cast<size_t>(c), 4, 0.5f, 2.f)),
        count(1, 7.f) {}
  BatchNormParams pointers() {
    return {weight.data(), bias.data(), mean.data(), var.data(), count.data()};
  }
  std::vector<float> weight, bias, mean, var, count;
};

// What one kernel computes from x and dy.
struct Result {
  std::vector<float> y, y_eval, dx, dweight, dbias, mean, var, count;
};

Result run(BatchNormKernel& k, const MemFormat& f, Backend& dnn, const std::vector<float>& x,
           const std::vector<float>& dy, int64_t channels, BatchStatReducer* reducer) {
  Params p(channels);
  Buffer workspace(std::max<size_t>(k.workspace_bytes(), 8));
  Buffer scratch(std::max<size_t>(k.scratch_bytes(), 8));
  FormattedBuffer xs(dnn, f, x), ys(dnn, f), dys(dnn, f, dy), dxs(dnn, f), evals(dnn, f);
  Result r;
  r.dweight.resize(static_cast<size_t>(channels));
  r.dbias.resize(static_cast<size_t>(channels));
  k.forward_inference(xs.data(), p.pointers(), evals.data(), scratch.data());
  k.forward_training(xs.data(), p.pointers(), ys.data(), workspace.data(), scratch.data(), reducer);
  k.backward(xs.data(), dys.data(), p.pointers(), workspace.data(), dxs.data(), r.dweight.data(),
             r.dbias.data(), scratch.data(), reducer);
  r.y = ys.get();
  r.y_eval = evals.get();
  r.dx = dxs.get();
  r.mean = p.mean;
  r.var = p.var;
  r.count = p.count;
  if (f.layout == Layout::blocked) {
    // The padding of a blocked layout must stay zero: exactly the logical elements can be
    // non-zero (up to the ReLU's zeros).
    for (void* buf : {ys.data(), dxs.data(), evals.data()}) {
      const float* raw = static_cast<const float*>(buf);
      size_t nonzero = 0;
      for (size_t i = 0; i < f.bytes / sizeof(float); ++i) nonzero += raw[i] != 0.f;
      EXPECT_LE(nonzero, x.size()) << "padding of " << f.str() << " was written";
    }
  }
  return r;
}

std::vector<float> half(const std::vector<float>& v, int k) {
  const size_t n = v.size() / 2;
  return {v.begin() + static_cast<std::ptrdiff_t>(n * static_cast<size_t>(k)),
          v.begin() + static_cast<std::ptrdiff_t>(n * static_cast<size_t>(k + 1))};
}

void expect_result(const Result& got, const Result& want, const std::string& what) {
  expect_close(got.y, want.y, 2e-5, what + " y");
  expect_close(got.y_eval, want.y_eval, 2e-5, what + " y (inference)");
  expect_close(got.dx, want.dx, 1e-4, what + " dx");
  expect_close(got.mean, want.mean, 1e-5, what + " running_mean");
  expect_close(got.var, want.var, 1e-5, what + " running_var");
  expect_close(got.count, want.count, 0, what + " num_batches_tracked");
}

TEST(OneDnnBatchNorm, AgreesWithTheReferenceOnEveryLayoutLocalAndSynchronised) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  // 20 channels: the blocked layout pads to 32.
  const Shape whole{2, 20, 3, 5}, each{1, 20, 3, 5};
  const auto x = random_floats(static_cast<size_t>(whole.numel()), 5, -2.f, 3.f);
  const auto dy = random_floats(static_cast<size_t>(whole.numel()), 6);
  for (bool relu : {false, true}) {
    auto rk =
        make_kernel<BatchNormKernel>(*ref, desc(whole, plain_format(whole, DType::f32), relu));
    const Result unmasked = run(*rk, plain_format(whole, DType::f32), *dnn, x, dy, 20, nullptr);
    // oneDNN's kernel applies the fused ReLU's backward itself (the compile step then skips the
    // ReLU's own): its gradients are the reference's for dy masked where the output is 0. The
    // reference kernel leaves that to the ReLU.
    std::vector<float> masked_dy = dy;
    for (size_t i = 0; i < dy.size(); ++i)
      if (unmasked.y[i] == 0.f) masked_dy[i] = 0.f;
    const Result want = run(*rk, plain_format(whole, DType::f32), *dnn, x, masked_dy, 20, nullptr);
    EXPECT_FALSE(rk->backward_applies_post_op());
    for (Layout layout : {Layout::plain, Layout::channels_last, Layout::blocked}) {
      const std::string what = std::string(layout_name(layout)) + (relu ? " +relu" : "");
      auto format = [&](const Shape& s) {
        return layout == Layout::blocked ? onednn_conv_format(*dnn, s)
                                         : plain_format(s, DType::f32, layout);
      };
      auto local = make_kernel<BatchNormKernel>(*dnn, desc(whole, format(whole), relu));
      EXPECT_EQ(local->format(), format(whole)) << "the producer's layout is kept";
      EXPECT_EQ(local->backward_applies_post_op(), relu);
      const Result got = run(*local, format(whole), *dnn, x, dy, 20, nullptr);
      expect_result(got, want, what);
      // Where the ReLU's backward still runs, the mask is applied twice: the same gradients.
      const Result twice = run(*local, format(whole), *dnn, x, masked_dy, 20, nullptr);
      expect_close(twice.dx, got.dx, 0, what + " dx, mask applied twice");
      expect_close(twice.dweight, got.dweight, 0, what + " dweight, mask applied twice");
      expect_close(got.dweight, want.dweight, 1e-4, what + " dweight");
      expect_close(got.dbias, want.dbias, 1e-4, what + " dbias");

      // Two ranks of one sample each, summing their statistics: sample k of the whole batch.
      test::LockstepGroup group(2);
      Result ranks[2];
      std::vector<std::thread> threads;
      threads.reserve(2);
      for (int r = 0; r < 2; ++r)
        threads.emplace_back([&, r] {
          auto k = make_kernel<BatchNormKernel>(*dnn, desc(each, format(each), relu));
          ranks[r] = run(*k, format(each), *dnn, half(x, r), half(dy, r), 20, &group.rank(r));
        });
      for (auto& t : threads) t.join();
      for (int r = 0; r < 2; ++r) {
        Result part = want;
        part.y = half(want.y, r);
        part.y_eval = half(want.y_eval, r);
        part.dx = half(want.dx, r);
        expect_result(ranks[r], part, what + " synchronised rank " + std::to_string(r));
      }
      // Weight and bias gradients stay local: their sum over the ranks is the whole batch's.
      std::vector<float> dweight(20), dbias(20);
      for (size_t c = 0; c < 20; ++c) {
        dweight[c] = ranks[0].dweight[c] + ranks[1].dweight[c];
        dbias[c] = ranks[0].dbias[c] + ranks[1].dbias[c];
      }
      expect_close(dweight, want.dweight, 1e-4, what + " synchronised dweight");
      expect_close(dbias, want.dbias, 1e-4, what + " synchronised dbias");
    }
  }
}

TEST(OneDnnBatchNorm, OneDimensionalAndThreeDimensionalInputs) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  for (const Shape& s : {Shape{3, 5, 7}, Shape{2, 16, 3, 2, 4}}) {
    const auto x = random_floats(static_cast<size_t>(s.numel()), 7, -1.f, 2.f);
    const auto dy = random_floats(static_cast<size_t>(s.numel()), 8);
    const MemFormat f = s.rank() == 5 ? onednn_conv_format(*dnn, s) : plain_format(s, DType::f32);
    auto rk = make_kernel<BatchNormKernel>(*ref, desc(s, plain_format(s, DType::f32), false));
    auto k = make_kernel<BatchNormKernel>(*dnn, desc(s, f, false));
    const Result want = run(*rk, plain_format(s, DType::f32), *dnn, x, dy, s[1], nullptr);
    expect_result(run(*k, f, *dnn, x, dy, s[1], nullptr), want, f.str());
  }
}

}  // namespace
}  // namespace crest
