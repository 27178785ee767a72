// Reference reorder between plain (N, C, spatial...) and channels_last (N, spatial..., C), and
// between float dtypes (mixed precision's conversions: to 16 bits rounded to nearest even, as
// crest/core/bf16.hpp and fp16.hpp round).
//
// A reorder within one dtype only moves elements, so it works on bytes and accepts every dtype.
#include <cstring>
#include <string>

#include "float16_codes.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

double load_float(const unsigned char* p, DType t) {
  switch (t) {
    case DType::f64: {
      double v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case DType::bf16:
    case DType::f16: {
      uint16_t code;
      std::memcpy(&code, p, sizeof code);
      float v;
      widen_range(&code, &v, 0, 1, t);
      return v;
    }
    default: {
      float v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
  }
}

void store_float(double v, unsigned char* p, DType t) {
  if (t == DType::f64) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
  const auto f = static_cast<float>(v);
  if (t == DType::f32) {
    std::memcpy(p, &f, sizeof f);
    return;
  }
  uint16_t code;
  narrow_range(&f, 1.f, &code, 0, 1, t);
  std::memcpy(p, &code, sizeof code);
}

class Reorder final : public ReorderKernel {
 public:
  Reorder(const MemFormat& from, const MemFormat& to) : from_(from), to_(to) {
    elem_ = dtype_size(from.dtype);
    to_elem_ = dtype_size(to.dtype);
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
    if (from_.layout == to_.layout && from_.dtype == to_.dtype) {
      std::memmove(dst, src, static_cast<size_t>(count_) * elem_);
      return;
    }
    if (from_.layout == to_.layout) {
      for (int64_t i = 0; i < count_; ++i) move(src, i, dst, i);
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
          move(src, from, dst, to);
        }
  }

 private:
  // Element `from` of the source to element `to` of the destination, converted if need be.
  void move(const unsigned char* src, int64_t from, unsigned char* dst, int64_t to) const {
    const unsigned char* s = src + static_cast<size_t>(from) * elem_;
    unsigned char* d = dst + static_cast<size_t>(to) * to_elem_;
    if (from_.dtype == to_.dtype)
      std::memcpy(d, s, elem_);
    else
      store_float(load_float(s, from_.dtype), d, to_.dtype);
  }

  MemFormat from_, to_;
  size_t elem_ = 0, to_elem_ = 0;
  int64_t count_ = 0, batch_ = 1, channels_ = 1, spatial_ = 1;
};

}  // namespace

std::unique_ptr<ReorderKernel> make_reorder(const MemFormat& from, const MemFormat& to) {
  if (from.layout == Layout::blocked || to.layout == Layout::blocked)
    throw_runtime("reorder " + from.str() + " -> " + to.str() +
                  ": the reference backend handles plain and channels_last only, not blocked");
  if (from.shape != to.shape ||
      (from.dtype != to.dtype && !(is_floating(from.dtype) && is_floating(to.dtype))))
    throw_input("reorder " + from.str() + " -> " + to.str() +
                ": source and destination must have the same shape, and the same dtype unless "
                "both are floating point");
  const int rank = from.shape.rank();
  if (from.layout != to.layout && (rank < 3 || rank > 5))
    throw_input("reorder " + from.str() + " -> " + to.str() +
                ": channels_last needs a rank 3 to 5 tensor (N, C, spatial...)");
  return std::make_unique<Reorder>(from, to);
}

}  // namespace crest::reference
