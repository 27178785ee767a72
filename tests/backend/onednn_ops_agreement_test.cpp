// The onednn activation kernels on plain and blocked layouts, in place, and which kinds fuse into
// a convolution. Pooling and dense agreement is a line each in tests/ops/op_table_test.cpp.
#include <gtest/gtest.h>

#include "backend/backend_test_util.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

using testing::expect_close;
using testing::FormattedBuffer;
using testing::onednn_conv_format;
using testing::random_floats;

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

}  // namespace
}  // namespace crest
