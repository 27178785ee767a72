// Flatten follows the reference's channels-last order: feature index ((d*H + h)*W + w)*C + c of
// an [N, C, D, H, W] tensor, whatever layout the producer used (plain here, blocked on oneDNN
// after a conv), so dense weights are interchangeable with Keras/PyTorch-NDHWC models.
#include <gtest/gtest.h>

#include "crest/core/units.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/shape_ops.hpp"
#include "support/host_backends.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

class FlattenOrder : public ::testing::TestWithParam<std::string> {};

TEST_P(FlattenOrder, IsDepthHeightWidthChannels) {
  const int64_t N = 2, C = 16, D = 2, H = 3, W = 4;
  Graph g;
  ValueId x = g.input("x", Shape{C, D, H, W}, Layout::plain);
  // An identity 1x1x1 convolution in front: on oneDNN its output is blocked (nCdhw16c), so the
  // flatten reads through a reorder to channels-last.
  ConvOptions co;
  co.out_channels = C;
  co.kernel = {1, 1, 1};
  co.bias = false;
  ValueId t = g.add("id", layers::conv(co), {x});
  ValueId f = g.add("flatten", layers::flatten(), {t});
  g.mark_output(f);
  auto backend = make_backend(GetParam());
  CompileOptions c;
  c.batch = N;
  c.training = false;
  Executor ex(g, *backend, c);
  TensorView wt = ex.params().value(0);
  for (int64_t i = 0; i < wt.numel(); ++i) wt.as<float>()[i] = (i / C == i % C) ? 1.f : 0.f;
  TensorView in = ex.input("x");
  for (int64_t i = 0; i < in.numel(); ++i) in.as<float>()[i] = static_cast<float>(i);
  ex.forward(false);
  TensorView out = ex.output(f);
  ASSERT_EQ(out.shape(), (Shape{N, D * H * W * C}));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            const int64_t src = (((n * C + ch) * D + d) * H + h) * W + w;
            const int64_t dst = n * D * H * W * C + ((d * H + h) * W + w) * C + ch;
            ASSERT_EQ(out.as<float>()[dst], static_cast<float>(src))
                << "n" << n << " c" << ch << " d" << d;
          }
}

INSTANTIATE_TEST_SUITE_P(Backends, FlattenOrder,
                         ::testing::ValuesIn(crest::test::host_backend_names()));

TEST(Units, ThousandsAndBytes) {
  EXPECT_EQ(with_thousands(8907556), "8,907,556");
  EXPECT_EQ(with_thousands(999), "999");
  EXPECT_EQ(with_thousands(-1234), "-1,234");
  EXPECT_EQ(with_thousands(0), "0");
  EXPECT_EQ(human_bytes(1.5 * (1 << 20)), "1.5 MiB");
  EXPECT_EQ(human_bytes(2.0 * (1 << 30)), "2.0 GiB");
}

}  // namespace
}  // namespace crest
