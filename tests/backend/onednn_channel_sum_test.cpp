// The channel_sum kernels (a convolution's bias gradient taken after its max pooling,
// src/graph/compile/route_bias_grad.cpp): per-channel sums over batch and space in every layout
// the onednn backend produces, against a plain double sum; the reference kernel on plain and
// channels-last input.
#include <gtest/gtest.h>

#include "backend/backend_test_util.hpp"
#include "backend/onednn_blocked_format.hpp"
#include "crest/backends/channel_sum_kernel.hpp"
#include "crest/core/bf16.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

using testing::onednn_conv_format;
using testing::random_floats;

// Sums of channel c of a plain [N, C, spatial...] tensor, in double.
std::vector<double> plain_sums(const std::vector<float>& x, const Shape& shape) {
  const int64_t n = shape[0], c = shape[1], spatial = shape.numel() / (n * c);
  std::vector<double> s(static_cast<size_t>(c), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < spatial; ++p)
        s[static_cast<size_t>(k)] += x[static_cast<size_t>((i * c + k) * spatial + p)];
  return s;
}

void expect_sums(Backend& backend, const MemFormat& f, const std::vector<float>& x,
                 const Shape& shape) {
  SCOPED_TRACE(backend.name() + " " + f.str());
  const MemFormat plain = plain_format(shape, DType::f32);
  Buffer laid_out(f.bytes);
  backend.reorder(plain, f)->execute(x.data(), laid_out.data());
  std::vector<float> got(static_cast<size_t>(shape[1]), -1.f);
  make_kernel<ChannelSumKernel>(backend, {f})->run(laid_out.data(), got.data());
  const std::vector<double> want = plain_sums(x, shape);
  for (size_t c = 0; c < want.size(); ++c)
    EXPECT_NEAR(got[c], want[c], 1e-5 * (1 + std::abs(want[c]))) << "channel " << c;
}

TEST(ChannelSum, EveryOneDnnLayoutAgreesWithAPlainSum) {
  auto dnn = make_backend("onednn");
  // 20 channels: a short last block; 1-, 2- and 3-D spatial extents. Both block widths on every
  // machine, and whatever layout this CPU's convolution picks.
  for (const Shape& shape :
       {Shape{2, 5, 9}, Shape{2, 20, 3, 5}, Shape{2, 32, 4, 3, 5}, Shape{3, 20, 2, 3, 4}}) {
    SCOPED_TRACE(shape.str());
    const auto x = random_floats(static_cast<size_t>(shape.numel()), 17);
    expect_sums(*dnn, plain_format(shape, DType::f32), x, shape);
    expect_sums(*dnn, plain_format(shape, DType::f32, Layout::channels_last), x, shape);
    for (int64_t block : testing::kBlockWidths) {
      const MemFormat blocked = testing::onednn_blocked_format(shape, block);
      ASSERT_EQ(blocked.layout, Layout::blocked) << blocked.str();
      expect_sums(*dnn, blocked, x, shape);
    }
    expect_sums(*dnn, onednn_conv_format(*dnn, shape), x, shape);
  }
}

// A bf16 tensor (a mixed-precision convolution's output gradient, whose bias gradient the
// Winograd kernel sums) sums into float32. Plain and channels-last codes are laid out here, so
// the case runs on CPUs without bf16 instructions; the blocked layout needs oneDNN's reorder.
TEST(ChannelSum, Bf16TensorsSumIntoFloat32) {
  auto dnn = make_backend("onednn");
  const Shape shape{2, 20, 3, 4, 5};
  const int64_t n = shape[0], c = shape[1], spatial = shape.numel() / (n * c);
  auto x = random_floats(static_cast<size_t>(shape.numel()), 23);
  std::vector<uint16_t> plain(x.size()), last(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < spatial; ++p) {
        const size_t at = static_cast<size_t>((i * c + k) * spatial + p);
        plain[at] = last[static_cast<size_t>((i * spatial + p) * c + k)] = float_to_bf16(x[at]);
        x[at] = bf16_to_float(plain[at]);
      }
  const std::vector<double> want = plain_sums(x, shape);
  auto sums_of = [&](const MemFormat& f, const void* codes) {
    SCOPED_TRACE(f.str());
    std::vector<float> got(static_cast<size_t>(c), -1.f);
    make_kernel<ChannelSumKernel>(*dnn, {f})->run(codes, got.data());
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_NEAR(got[k], want[k], 1e-5 * (1 + std::abs(want[k]))) << "channel " << k;
  };
  sums_of(plain_format(shape, DType::bf16), plain.data());
  sums_of(plain_format(shape, DType::bf16, Layout::channels_last), last.data());
  if (const std::string why = test::dtype_refusal("onednn", DType::bf16); !why.empty())
    GTEST_SKIP() << "blocked bf16: " << why;
  const MemFormat blocked = testing::onednn_blocked_format(shape, 16, DType::bf16);
  Buffer codes(blocked.bytes);
  dnn->reorder(plain_format(shape, DType::bf16), blocked)->execute(plain.data(), codes.data());
  sums_of(blocked, codes.data());
}

TEST(ChannelSum, ReferenceKernelTakesPlainAndChannelsLast) {
  auto ref = make_backend("reference");
  const Shape shape{2, 6, 3, 4};
  const auto x = random_floats(static_cast<size_t>(shape.numel()), 5);
  expect_sums(*ref, plain_format(shape, DType::f32), x, shape);
  expect_sums(*ref, plain_format(shape, DType::f32, Layout::channels_last), x, shape);
}

}  // namespace
}  // namespace crest
