// Reference reorder between plain (N, C, spatial...) and channels_last (N, spatial..., C).
//
// A reorder only moves elements, so it works on bytes and accepts every dtype.
#include <cstring>
#include <string>

#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

class Reorder final : public ReorderKernel {
 public:
  Reorder(const MemFormat& from, const MemFormat& to) : from_(from), to_(to) {
    elem_ = dtype_size(from.dtype);
    count_ = from.shape.numel();
    if (from.layout != to.layout) {
      batch_ = from.shape[0];
      channels_ = from.shape[1];
      spatial_ = count_ / (batch_ * channels_);
    }
  }

  void execute(const void* src_v, void* dst_v) override {
    const auto* src = static_cast<const unsigned char*>(src_v);
    auto* dst = static_cast<unsigned char*>(dst_v);
    if (from_.layout == to_.layout) {
      std::memmove(dst, src, static_cast<size_t>(count_) * elem_);
      return;
    }
    const bool to_channels_last = to_.layout == Layout::channels_last;
    for (int64_t n = 0; n < batch_; ++n)
      for (int64_t c = 0; c < channels_; ++c)
        for (int64_t s = 0; s < spatial_; ++s) {
          const int64_t plain = (n * channels_ + c) * spatial_ + s;
          const int64_t last = (n * spatial_ + s) * channels_ + c;
          const int64_t from = to_channels_last ? plain : last;
          const int64_t to = to_channels_last ? last : plain;
          std::memcpy(dst + static_cast<size_t>(to) * elem_,
                      src + static_cast<size_t>(from) * elem_, elem_);
        }
  }

 private:
  MemFormat from_, to_;
  size_t elem_ = 0;
  int64_t count_ = 0, batch_ = 1, channels_ = 1, spatial_ = 1;
};

}  // namespace

std::unique_ptr<ReorderKernel> make_reorder(const MemFormat& from, const MemFormat& to) {
  if (from.layout == Layout::blocked || to.layout == Layout::blocked)
    throw_runtime("reorder " + from.str() + " -> " + to.str() +
                  ": the reference backend handles plain and channels_last only, not blocked");
  if (from.shape != to.shape || from.dtype != to.dtype)
    throw_input("reorder " + from.str() + " -> " + to.str() +
                ": source and destination must have the same shape and dtype");
  const int rank = from.shape.rank();
  if (from.layout != to.layout && (rank < 3 || rank > 5))
    throw_input("reorder " + from.str() + " -> " + to.str() +
                ": channels_last needs a rank 3 to 5 tensor (N, C, spatial...)");
  return std::make_unique<Reorder>(from, to);
}

}  // namespace crest::reference
