// The onednn reorder and concat kernels: exact round trips between plain, channels_last and
// blocked layouts, and channel concatenation (forward and backward split) in each of them.
#include <gtest/gtest.h>

#include "backend/backend_test_util.hpp"
#include "backend/onednn_blocked_format.hpp"

namespace crest {
namespace {

using testing::FormattedBuffer;
using testing::onednn_conv_format;
using testing::random_floats;

TEST(OneDnnReorder, RoundTripsAreExact) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  for (const Shape& shape :
       {Shape{2, 5, 9}, Shape{2, 20, 3, 5}, Shape{1, 16, 3, 4, 5}, Shape{3, 4, 6, 5, 2}}) {
    SCOPED_TRACE(shape.str());
    const MemFormat plain = plain_format(shape, DType::f32);
    const MemFormat last = plain_format(shape, DType::f32, Layout::channels_last);
    const MemFormat blocked = onednn_conv_format(*dnn, shape);
    const auto x = random_floats(static_cast<size_t>(shape.numel()), 41);

    // channels_last agrees bit for bit with the reference reorder.
    std::vector<float> last_ref(x.size()), last_got(x.size());
    ref->reorder(plain, last)->execute(x.data(), last_ref.data());
    dnn->reorder(plain, last)->execute(x.data(), last_got.data());
    EXPECT_EQ(last_got, last_ref);

    // plain -> channels_last -> blocked -> plain, and blocked -> channels_last -> plain.
    Buffer b(blocked.bytes);
    dnn->reorder(last, blocked)->execute(last_got.data(), b.data());
    std::vector<float> back(x.size()), last2(x.size()), back2(x.size());
    dnn->reorder(blocked, plain)->execute(b.data(), back.data());
    EXPECT_EQ(back, x);
    dnn->reorder(blocked, last)->execute(b.data(), last2.data());
    dnn->reorder(last, plain)->execute(last2.data(), back2.data());
    EXPECT_EQ(back2, x);
  }
}

// Both widths (nCdhw16c as AVX-512 dispatch picks, nCdhw8c as AVX2 picks) on every machine.
TEST(OneDnnReorder, FormatsDescribeThemselves) {
  for (int64_t block : testing::kBlockWidths) {
    const std::string name = "nCdhw" + std::to_string(block) + "c";
    const MemFormat blocked = testing::onednn_blocked_format(Shape{2, 32, 4, 4, 4}, block);
    ASSERT_EQ(blocked.layout, Layout::blocked);
    ASSERT_TRUE(blocked.opaque);
    EXPECT_EQ(blocked.opaque->name(), name);
    EXPECT_EQ(blocked.str(), "f32[2, 32, 4, 4, 4] " + name);
    EXPECT_EQ(blocked.bytes, 2u * 32 * 64 * 4);
    // The same layout made again compares equal; another shape or width does not.
    EXPECT_EQ(testing::onednn_blocked_format(Shape{2, 32, 4, 4, 4}, block), blocked);
    EXPECT_NE(testing::onednn_blocked_format(Shape{2, 48, 4, 4, 4}, block), blocked);
    EXPECT_NE(testing::onednn_blocked_format(Shape{2, 32, 4, 4, 4}, 24 - block), blocked);
    // Padding counts in the size: 20 channels are stored as whole blocks.
    const MemFormat padded = testing::onednn_blocked_format(Shape{2, 20, 3, 3, 3}, block);
    ASSERT_EQ(padded.opaque->name(), name);
    EXPECT_EQ(padded.bytes, static_cast<size_t>(2 * ((20 + block - 1) / block * block) * 27 * 4));
  }
  // What this CPU's convolution picks describes itself the same way.
  auto dnn = make_backend("onednn");
  const MemFormat chosen = onednn_conv_format(*dnn, Shape{2, 32, 4, 4, 4});
  EXPECT_EQ(chosen.str().rfind("f32[2, 32, 4, 4, 4] ", 0), 0u) << chosen.str();
}

// Concat `channels` inputs of shape [n, c_i, spatial] in `layout` (blocked: the conv layout)
// and compare forward and backward with the reference on plain data.
MemFormat check_concat(const std::vector<int64_t>& channels, const std::vector<int64_t>& spatial,
                       Layout layout) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  const int64_t n = 2;
  std::vector<MemFormat> plain, formats;
  std::vector<std::vector<float>> xs;
  int64_t total = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    std::vector<int64_t> dims{n, channels[i]};
    dims.insert(dims.end(), spatial.begin(), spatial.end());
    const Shape s(dims);
    plain.push_back(plain_format(s, DType::f32));
    formats.push_back(layout == Layout::blocked ? onednn_conv_format(*dnn, s)
                                                : plain_format(s, DType::f32, layout));
    xs.push_back(random_floats(static_cast<size_t>(s.numel()), 50 + static_cast<uint32_t>(i)));
    total += channels[i];
  }
  auto rk = ref->concat(plain);
  auto ok = dnn->concat(formats);
  const MemFormat out = ok->dst_format();
  EXPECT_EQ(out.shape[1], total);

  std::vector<const void*> rsrc;
  for (const auto& x : xs) rsrc.push_back(x.data());
  std::vector<float> y_ref(static_cast<size_t>(out.shape.numel()));
  rk->forward(rsrc, y_ref.data());

  std::vector<std::unique_ptr<FormattedBuffer>> in;
  std::vector<const void*> src;
  for (size_t i = 0; i < xs.size(); ++i) {
    in.push_back(std::make_unique<FormattedBuffer>(*dnn, formats[i], xs[i]));
    src.push_back(in.back()->data());
  }
  FormattedBuffer y(*dnn, out);
  ok->forward(src, y.data());
  EXPECT_EQ(y.get(), y_ref) << "concat forward into " << out.str();

  // Backward: the gradient splits back; input 1 wants none (null).
  const auto dy = random_floats(y_ref.size(), 60);
  FormattedBuffer dys(*dnn, out, dy);
  std::vector<std::vector<float>> dx_ref;
  std::vector<void*> rdst, dst;
  std::vector<std::unique_ptr<FormattedBuffer>> dx;
  for (size_t i = 0; i < xs.size(); ++i) {
    dx_ref.emplace_back(xs[i].size());
    rdst.push_back(dx_ref.back().data());
    dx.push_back(std::make_unique<FormattedBuffer>(*dnn, formats[i]));
    dst.push_back(i == 1 ? nullptr : dx.back()->data());
  }
  rk->backward(dy.data(), rdst);
  ok->backward(dys.data(), dst);
  for (size_t i = 0; i < xs.size(); ++i)
    if (i != 1) {
      EXPECT_EQ(dx[i]->get(), dx_ref[i])
          << "concat backward, input " << i << " " << formats[i].str();
    }
  return out;
}

TEST(OneDnnConcat, Plain) {
  check_concat({3, 5, 2}, {4, 3}, Layout::plain);
  check_concat({1, 2}, {7}, Layout::plain);
}

TEST(OneDnnConcat, ChannelsLast) { check_concat({3, 5, 8}, {2, 3, 2}, Layout::channels_last); }

TEST(OneDnnConcat, BlockedAligned) {
  // Block-aligned inputs keep their layout, so a following convolution needs no reorder.
  auto dnn = make_backend("onednn");
  const MemFormat out = check_concat({16, 32, 16}, {3, 4}, Layout::blocked);
  EXPECT_EQ(out, onednn_conv_format(*dnn, out.shape)) << out.str();
}

TEST(OneDnnConcat, BlockedUnaligned) {
  // 20 channels in 16-blocks: the second input starts mid-block.
  check_concat({20, 16, 24}, {2, 3, 2}, Layout::blocked);
}

}  // namespace
}  // namespace crest
