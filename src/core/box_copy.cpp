// box_transfer (box_copy.hpp): the box's rows one at a time, each a memcpy or an add loop. A row
// runs over the innermost dims the box spans whole in both arrays, not just the last one: a
// channels-last block split along depth is one contiguous run, where a row of the last dim
// alone would be its channels (128 bytes for 32 floats; the halo copies took 6 % of a split
// CosmoFlow step that way).
#include "crest/core/box_copy.hpp"

#include <cstring>

#include "crest/core/error.hpp"

namespace crest {
namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

int64_t offset_of(const std::vector<int64_t>& start, const std::vector<int64_t>& index,
                  const std::vector<int64_t>& strides) {
  int64_t o = 0;
  for (size_t d = 0; d < strides.size(); ++d) o += (start[d] + index[d]) * strides[d];
  return o;
}

template <typename T>
void add_row(const std::byte* src, std::byte* dst, int64_t n) {
  const auto* s = reinterpret_cast<const T*>(src);
  auto* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] += s[i];
}

}  // namespace

void box_transfer(const void* src, const BoxAt& from, void* dst, const BoxAt& to,
                  const std::vector<int64_t>& count, DType dtype, BoxOp op) {
  const size_t rank = count.size();
  CREST_CHECK(rank > 0 && from.dims.size() == rank && to.dims.size() == rank &&
                  from.start.size() == rank && to.start.size() == rank,
              "box_transfer: ranks differ");
  CREST_CHECK(op != BoxOp::add || dtype == DType::f32 || dtype == DType::f64,
              "box_transfer: sums need float32 or float64");
  for (int64_t c : count)
    if (c <= 0) return;
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  const auto src_strides = strides_of(from.dims), dst_strides = strides_of(to.dims);
  // The row: dims [inner, rank) when every dim after `inner` is spanned whole in both arrays.
  size_t inner = rank - 1;
  int64_t row = count.back();
  while (inner > 0 && count[inner] == from.dims[inner] && count[inner] == to.dims[inner]) {
    --inner;
    row *= count[inner];
  }
  std::vector<int64_t> index(rank, 0);
  for (;;) {
    const auto* s = op == BoxOp::zero ? nullptr
                                      : static_cast<const std::byte*>(src) +
                                            offset_of(from.start, index, src_strides) * elem;
    auto* d = static_cast<std::byte*>(dst) + offset_of(to.start, index, dst_strides) * elem;
    if (op == BoxOp::copy)
      std::memcpy(d, s, static_cast<size_t>(row * elem));
    else if (op == BoxOp::zero)
      std::memset(d, 0, static_cast<size_t>(row * elem));
    else if (dtype == DType::f32)
      add_row<float>(s, d, row);
    else
      add_row<double>(s, d, row);
    // The next row: an odometer over the dims before the row's.
    size_t dim = inner;
    while (dim-- > 0) {
      if (++index[dim] < count[dim]) break;
      index[dim] = 0;
    }
    if (dim == static_cast<size_t>(-1)) return;
  }
}

}  // namespace crest
