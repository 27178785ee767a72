// The onednn pooling, activation and dense kernels agree with the reference backend, on plain
// and blocked layouts.
#include <gtest/gtest.h>

#include "backend/backend_test_util.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

using testing::expect_close;
using testing::FormattedBuffer;
using testing::onednn_conv_format;
using testing::random_floats;

// ---------------------------------------------------------------------------------------------
// Pooling

struct PoolCase {
  int rank = 2;
  PoolKind kind = PoolKind::max;
  int64_t n = 2, channels = 3, size = 7, kernel = 2, stride = 2, pad_lo = 0, pad_hi = 0;
  bool blocked = false;  // feed the kernel a blocked src (as a conv would produce)
};

void check_pool(const PoolCase& c) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  PoolDesc d;
  d.spatial_rank = c.rank;
  d.kind = c.kind;
  d.n = c.n;
  d.channels = c.channels;
  std::vector<int64_t> in_dims{c.n, c.channels}, out_dims{c.n, c.channels};
  for (size_t i = 0; i < static_cast<size_t>(c.rank); ++i) {
    d.in_size[i] = c.size + static_cast<int64_t>(i);
    d.kernel[i] = c.kernel;
    d.stride[i] = c.stride;
    d.pad_lo[i] = c.pad_lo;
    d.pad_hi[i] = c.pad_hi;
    d.out_size[i] = (d.in_size[i] + c.pad_lo + c.pad_hi - c.kernel) / c.stride + 1;
    in_dims.push_back(d.in_size[i]);
    out_dims.push_back(d.out_size[i]);
  }
  const Shape in_shape(in_dims), out_shape(out_dims);
  const MemFormat hint =
      c.blocked ? onednn_conv_format(*dnn, in_shape) : plain_format(in_shape, DType::f32);
  if (c.blocked) {
    ASSERT_EQ(hint.layout, Layout::blocked) << hint.str();
  }
  auto rk = ref->pool(d, plain_format(in_shape, DType::f32));
  auto ok = dnn->pool(d, hint);
  EXPECT_EQ(ok->src_format(), hint);

  const auto x = random_floats(static_cast<size_t>(in_shape.numel()), 11);
  const auto dy = random_floats(static_cast<size_t>(out_shape.numel()), 12);
  std::vector<float> y_ref(static_cast<size_t>(out_shape.numel()));
  std::vector<float> dx_ref(static_cast<size_t>(in_shape.numel()));
  Buffer rws(rk->workspace_bytes()), rscratch(rk->scratch_bytes());
  rk->forward(x.data(), y_ref.data(), rws.data(), rscratch.data());
  rk->backward(dy.data(), rws.data(), dx_ref.data(), rscratch.data());

  Buffer ws(ok->workspace_bytes()), scratch(ok->scratch_bytes());
  if (c.kind == PoolKind::max) {
    EXPECT_GT(ok->workspace_bytes(), 0u);
  }
  FormattedBuffer xs(*dnn, ok->src_format(), x), ys(*dnn, ok->dst_format());
  ok->forward(xs.data(), ys.data(), ws.data(), scratch.data());
  expect_close(ys.get(), y_ref, 1e-6, "pool forward");
  FormattedBuffer dys(*dnn, ok->dst_format(), dy), dxs(*dnn, ok->src_format());
  ok->backward(dys.data(), ws.data(), dxs.data(), scratch.data());
  expect_close(dxs.get(), dx_ref, 1e-6, "pool backward");
}

TEST(OneDnnPool, Max) {
  check_pool({.rank = 1, .size = 9});
  check_pool({.rank = 2, .kernel = 3, .stride = 2, .pad_lo = 1, .pad_hi = 1});
  check_pool({.rank = 3, .channels = 16, .size = 6, .blocked = true});
}

TEST(OneDnnPool, AverageIncludePadding) {
  check_pool({.rank = 2,
              .kind = PoolKind::avg_include_pad,
              .size = 6,
              .kernel = 3,
              .stride = 1,
              .pad_lo = 1,
              .pad_hi = 1});
  check_pool({.rank = 3,
              .kind = PoolKind::avg_include_pad,
              .channels = 20,
              .size = 5,
              .kernel = 2,
              .stride = 2,
              .pad_lo = 1,
              .pad_hi = 0,
              .blocked = true});
}

TEST(OneDnnPool, AverageExcludePadding) {
  check_pool({.rank = 2,
              .kind = PoolKind::avg_exclude_pad,
              .size = 6,
              .kernel = 3,
              .stride = 2,
              .pad_lo = 1,
              .pad_hi = 2});
  check_pool({.rank = 1,
              .kind = PoolKind::avg_exclude_pad,
              .channels = 16,
              .size = 10,
              .kernel = 3,
              .stride = 3,
              .pad_lo = 2,
              .pad_hi = 1,
              .blocked = true});
}

// ---------------------------------------------------------------------------------------------
// Activations

const EltwiseDesc kActivations[] = {
    {EltwiseKind::relu, 0.f, 0.f},      {EltwiseKind::leaky_relu, 0.3f, 0.f},
    {EltwiseKind::tanh, 0.f, 0.f},      {EltwiseKind::sigmoid, 0.f, 0.f},
    {EltwiseKind::linear, 1.5f, 0.25f}, {EltwiseKind::none, 0.f, 0.f}};

void check_eltwise(const EltwiseDesc& e, const MemFormat& f, bool in_place) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  const Shape& shape = f.shape;
  auto rk = ref->eltwise(e, plain_format(shape, DType::f32));
  auto ok = dnn->eltwise(e, f);
  const auto x = random_floats(static_cast<size_t>(shape.numel()), 21, -3.f, 3.f);
  const auto dy = random_floats(static_cast<size_t>(shape.numel()), 22);
  std::vector<float> y_ref(x.size()), dx_ref(x.size());
  rk->forward(x.data(), y_ref.data());
  rk->backward(y_ref.data(), dy.data(), dx_ref.data());

  FormattedBuffer xs(*dnn, f, x), ys(*dnn, f);
  void* y = in_place ? xs.data() : ys.data();
  ok->forward(xs.data(), y);
  const std::vector<float> y_got = in_place ? xs.get() : ys.get();
  expect_close(y_got, y_ref, 1e-6, "eltwise forward");
  if (f.layout == Layout::blocked && e.kind != EltwiseKind::relu) {
    // The padding of a blocked layout must stay zero (sigmoid(0) is not): exactly the logical
    // elements are non-zero (random inputs, so no real zero is expected).
    const float* raw = static_cast<const float*>(y);
    size_t nonzero = 0;
    for (size_t i = 0; i < f.bytes / sizeof(float); ++i) nonzero += raw[i] != 0.f;
    EXPECT_EQ(nonzero, x.size()) << "padding of " << f.str() << " was written";
  }
  FormattedBuffer dys(*dnn, f, dy), dxs(*dnn, f);
  void* dx = in_place ? dys.data() : dxs.data();
  ok->backward(y, dys.data(), dx);
  expect_close(in_place ? dys.get() : dxs.get(), dx_ref, 1e-6, "eltwise backward");
}

TEST(OneDnnEltwise, AllKindsPlainAndBlocked) {
  auto dnn = make_backend("onednn");
  // 20 channels: the blocked layout pads to 32, so padding handling is exercised too.
  const Shape shape{2, 20, 3, 5};
  const MemFormat formats[] = {plain_format(shape, DType::f32),
                               plain_format(shape, DType::f32, Layout::channels_last),
                               onednn_conv_format(*dnn, shape)};
  for (const EltwiseDesc& e : kActivations)
    for (const MemFormat& f : formats) {
      SCOPED_TRACE(std::to_string(static_cast<int>(e.kind)) + " " + f.str());
      check_eltwise(e, f, false);
    }
}

TEST(OneDnnEltwise, InPlace) {
  auto dnn = make_backend("onednn");
  const Shape shape{3, 16, 7};
  for (const EltwiseDesc& e : kActivations) {
    SCOPED_TRACE(static_cast<int>(e.kind));
    check_eltwise(e, plain_format(shape, DType::f32), true);
    check_eltwise(e, onednn_conv_format(*dnn, shape), true);
  }
}

TEST(OneDnnEltwise, FusesExactlyTheDstInvertibleKinds) {
  auto dnn = make_backend("onednn");
  EXPECT_TRUE(dnn->fuses({EltwiseKind::relu, 0.f, 0.f}));
  EXPECT_TRUE(dnn->fuses({EltwiseKind::leaky_relu, 0.1f, 0.f}));
  EXPECT_FALSE(dnn->fuses({EltwiseKind::leaky_relu, 0.f, 0.f}));
  EXPECT_FALSE(dnn->fuses({EltwiseKind::leaky_relu, -0.1f, 0.f}));
  EXPECT_TRUE(dnn->fuses({EltwiseKind::tanh, 0.f, 0.f}));
  EXPECT_TRUE(dnn->fuses({EltwiseKind::sigmoid, 0.f, 0.f}));
  EXPECT_TRUE(dnn->fuses({EltwiseKind::linear, 2.f, 1.f}));
  EXPECT_THROW(
      dnn->eltwise({EltwiseKind::leaky_relu, -0.5f, 0.f}, plain_format(Shape{2, 3}, DType::f32)),
      Error);
}

// ---------------------------------------------------------------------------------------------
// Dense

void check_dense(int64_t n, int64_t in, int64_t out, bool bias) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  DenseDesc d;
  d.n = n;
  d.in_features = in;
  d.out_features = out;
  d.bias = bias;
  auto rk = ref->dense(d);
  auto ok = dnn->dense(d);
  const auto x = random_floats(static_cast<size_t>(n * in), 31);
  const auto w = random_floats(static_cast<size_t>(out * in), 32);
  const auto b = random_floats(static_cast<size_t>(out), 33);
  const auto dy = random_floats(static_cast<size_t>(n * out), 34);
  Buffer scratch(ok->scratch_bytes());

  std::vector<float> y_ref(dy.size()), y(dy.size(), 1e30f);
  rk->forward(x.data(), w.data(), b.data(), y_ref.data(), nullptr);
  ok->forward(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), scratch.data());
  expect_close(y, y_ref, 1e-5, "dense forward");

  std::vector<float> dx_ref(x.size()), dx(x.size(), 1e30f);
  rk->backward_data(dy.data(), w.data(), dx_ref.data(), nullptr);
  ok->backward_data(dy.data(), w.data(), dx.data(), scratch.data());
  expect_close(dx, dx_ref, 1e-5, "dense backward data");

  std::vector<float> dw_ref(w.size()), dw(w.size(), 1e30f), db_ref(b.size()), db(b.size(), 1e30f);
  rk->backward_weights(x.data(), dy.data(), dw_ref.data(), db_ref.data(), nullptr);
  ok->backward_weights(x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr, scratch.data());
  expect_close(dw, dw_ref, 1e-5, "dense backward weights");
  if (bias) expect_close(db, db_ref, 1e-5, "dense backward bias");
}

TEST(OneDnnDense, AgreesWithReference) {
  check_dense(3, 17, 9, true);
  check_dense(4, 64, 32, false);
  check_dense(1, 5, 1, true);
  check_dense(8, 128, 256, true);
}

}  // namespace
}  // namespace crest
