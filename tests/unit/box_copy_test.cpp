// box_transfer against an element-by-element transfer: random arrays and boxes of rank 1 to 5,
// copy, add and zero, float32, float64 and int32, with boxes that span some inner dims whole in
// both arrays (the rows then run over several dims), in one array only, or in neither.
#include "crest/core/box_copy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace crest {
namespace {

// The flat index of `index` (relative to `start`) in a row-major array of extents `dims`.
int64_t flat(const std::vector<int64_t>& dims, const std::vector<int64_t>& start,
             const std::vector<int64_t>& index) {
  int64_t o = 0;
  for (size_t d = 0; d < dims.size(); ++d) o = o * dims[d] + start[d] + index[d];
  return o;
}

template <typename T>
void naive_transfer(const std::vector<T>& src, const std::vector<int64_t>& src_dims,
                    const std::vector<int64_t>& src_start, std::vector<T>& dst,
                    const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& dst_start,
                    const std::vector<int64_t>& count, BoxOp op) {
  std::vector<int64_t> index(count.size(), 0);
  for (;;) {
    const T v = src[static_cast<size_t>(flat(src_dims, src_start, index))];
    T& d = dst[static_cast<size_t>(flat(dst_dims, dst_start, index))];
    d = op == BoxOp::copy ? v : op == BoxOp::add ? static_cast<T>(d + v) : T{0};
    size_t dim = count.size();
    while (dim-- > 0) {
      if (++index[dim] < count[dim]) break;
      index[dim] = 0;
    }
    if (dim == static_cast<size_t>(-1)) return;
  }
}

// One random case: a box of `count` inside each array, each array's extent along a dim either
// the box's (spanned whole) or larger, as `whole` draws.
struct Case {
  std::vector<int64_t> src_dims, src_start, dst_dims, dst_start, count;
};

Case random_case(std::mt19937& rng, size_t rank) {
  std::uniform_int_distribution<int64_t> extent(1, 5), extra(1, 3);
  std::bernoulli_distribution whole(0.6);
  Case c;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = extent(rng);
    c.count.push_back(n);
    for (auto [dims, start] :
         {std::pair{&c.src_dims, &c.src_start}, std::pair{&c.dst_dims, &c.dst_start}}) {
      const int64_t more = whole(rng) ? 0 : extra(rng);
      dims->push_back(n + more);
      start->push_back(more == 0 ? 0 : std::uniform_int_distribution<int64_t>(0, more)(rng));
    }
  }
  return c;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

template <typename T>
void check_random_boxes(DType dtype, BoxOp op) {
  std::mt19937 rng(5);
  for (size_t rank = 1; rank <= 5; ++rank)
    for (int trial = 0; trial < 60; ++trial) {
      const Case c = random_case(rng, rank);
      std::vector<T> src(static_cast<size_t>(numel(c.src_dims)));
      std::vector<T> dst(static_cast<size_t>(numel(c.dst_dims)));
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>(i % 97 + 1);
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<T>(1000 + i % 89);
      std::vector<T> want = dst;
      naive_transfer(src, c.src_dims, c.src_start, want, c.dst_dims, c.dst_start, c.count, op);
      // Zeroing reads nothing of the source: none is given.
      box_transfer(op == BoxOp::zero ? nullptr : src.data(), BoxAt{c.src_dims, c.src_start},
                   dst.data(), BoxAt{c.dst_dims, c.dst_start}, c.count, dtype, op);
      ASSERT_EQ(dst, want) << "rank " << rank << " trial " << trial;
    }
}

TEST(BoxTransfer, CopiesLikeAnElementByElementCopy) {
  check_random_boxes<float>(DType::f32, BoxOp::copy);
  check_random_boxes<double>(DType::f64, BoxOp::copy);
  check_random_boxes<int32_t>(DType::i32, BoxOp::copy);
}

TEST(BoxTransfer, AddsLikeAnElementByElementAdd) {
  check_random_boxes<float>(DType::f32, BoxOp::add);
  check_random_boxes<double>(DType::f64, BoxOp::add);
}

TEST(BoxTransfer, ZeroesExactlyTheBox) {
  check_random_boxes<float>(DType::f32, BoxOp::zero);
  check_random_boxes<int32_t>(DType::i32, BoxOp::zero);
}

// A channels-last block of a split along depth ([n, d, h, w, c], the box spanning h, w and c
// whole) into a window with a halo row before it: rows of whole depth slices, as many rows as
// depth rows times batch, each one contiguous run. And a box whose last dim is partial in the
// destination only: the rows stay single elements' runs.
TEST(BoxTransfer, HaloWindowShapes) {
  const std::vector<int64_t> block{2, 3, 4, 5, 6}, window{2, 4, 4, 5, 6};
  std::vector<float> src(static_cast<size_t>(numel(block)));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  std::vector<float> dst(static_cast<size_t>(numel(window)), -1.f), want = dst;
  naive_transfer(src, block, {0, 0, 0, 0, 0}, want, window, {0, 1, 0, 0, 0}, block, BoxOp::copy);
  box_transfer(src.data(), BoxAt{block, {0, 0, 0, 0, 0}}, dst.data(),
               BoxAt{window, {0, 1, 0, 0, 0}}, block, DType::f32, BoxOp::copy);
  EXPECT_EQ(dst, want);

  const std::vector<int64_t> wider{2, 3, 4, 5, 7};
  std::vector<float> out(static_cast<size_t>(numel(wider)), -1.f), expected = out;
  naive_transfer(src, block, {0, 0, 0, 0, 0}, expected, wider, {0, 0, 0, 0, 1}, block, BoxOp::copy);
  box_transfer(src.data(), BoxAt{block, {0, 0, 0, 0, 0}}, out.data(), BoxAt{wider, {0, 0, 0, 0, 1}},
               block, DType::f32, BoxOp::copy);
  EXPECT_EQ(out, expected);
}

}  // namespace
}  // namespace crest
