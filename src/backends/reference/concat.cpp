// Reference concatenation along the channel axis (dim 1) of tensors of one layout, plain or
// channels-last.
//
// Concatenation only moves elements, so it works on bytes: for each row (a batch item in plain
// layout; a batch item's position in channels-last layout), input i's channels, a contiguous
// block there, land after those of inputs 0..i-1.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

class Concat final : public ConcatKernel {
 public:
  Concat(const std::vector<MemFormat>& srcs, MemFormat dst) : dst_(std::move(dst)) {
    const size_t elem = dtype_size(dst_.dtype);
    batch_ = channel_rows(dst_);
    // Bytes per row of each input, and of the output.
    for (const MemFormat& f : srcs)
      block_bytes_.push_back(static_cast<size_t>(f.shape.numel() / batch_) * elem);
    dst_block_bytes_ = static_cast<size_t>(dst_.shape.numel() / batch_) * elem;
  }

  MemFormat dst_format() const override { return dst_; }

  void forward(const std::vector<const void*>& srcs, void* dst_v) override {
    CREST_CHECK(srcs.size() == block_bytes_.size(), "concat forward got the wrong input count");
    auto* dst = static_cast<unsigned char*>(dst_v);
    for (int64_t n = 0; n < batch_; ++n) {
      size_t offset = static_cast<size_t>(n) * dst_block_bytes_;
      for (size_t i = 0; i < srcs.size(); ++i) {
        const auto* src = static_cast<const unsigned char*>(srcs[i]);
        std::memcpy(dst + offset, src + static_cast<size_t>(n) * block_bytes_[i], block_bytes_[i]);
        offset += block_bytes_[i];
      }
    }
  }

  void backward(const void* diff_dst_v, const std::vector<void*>& diff_srcs) override {
    CREST_CHECK(diff_srcs.size() == block_bytes_.size(),
                "concat backward got the wrong gradient count");
    const auto* diff_dst = static_cast<const unsigned char*>(diff_dst_v);
    for (int64_t n = 0; n < batch_; ++n) {
      size_t offset = static_cast<size_t>(n) * dst_block_bytes_;
      for (size_t i = 0; i < diff_srcs.size(); ++i) {
        if (diff_srcs[i]) {
          auto* diff_src = static_cast<unsigned char*>(diff_srcs[i]);
          std::memcpy(diff_src + static_cast<size_t>(n) * block_bytes_[i], diff_dst + offset,
                      block_bytes_[i]);
        }
        offset += block_bytes_[i];
      }
    }
  }

 private:
  MemFormat dst_;
  int64_t batch_ = 1;
  std::vector<size_t> block_bytes_;
  size_t dst_block_bytes_ = 0;
};

}  // namespace

std::unique_ptr<ConcatKernel> make_concat(const std::vector<MemFormat>& srcs) {
  if (srcs.empty()) throw_input("concat: needs at least one input");
  const MemFormat& first = srcs.front();
  if (first.shape.rank() < 2)
    throw_input("concat: inputs must have rank >= 2 (N, C, ...), got " + first.str());
  Shape out = first.shape;
  out[1] = 0;
  for (const MemFormat& f : srcs) {
    bool same = f.dtype == first.dtype && f.shape.rank() == first.shape.rank();
    for (int d = 0; same && d < f.shape.rank(); ++d)
      if (d != 1 && f.shape[d] != first.shape[d]) same = false;
    if (!same)
      throw_input("concat: input " + f.str() + " does not match " + first.str() +
                  " (same dtype and all dimensions but the channels required)");
    out[1] += f.shape[1];
  }
  if (first.shape[0] <= 0) throw_input("concat: batch must be positive, got " + first.str());
  return std::make_unique<Concat>(srcs, plain_format(out, first.dtype, first.layout));
}

}  // namespace crest::reference
