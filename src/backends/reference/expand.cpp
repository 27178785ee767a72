// Reference broadcast over the spatial extent and its adjoint: plain loops, float and double
// (sums in double).
#include "crest/backends/expand_kernel.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

template <typename T>
class Expand final : public ExpandKernel {
 public:
  explicit Expand(const ExpandDesc& d) : rows_(d.n * d.channels), spatial_(d.spatial) {}

  void forward(const void* src_v, void* dst_v) override {
    const T* x = static_cast<const T*>(src_v);
    T* y = static_cast<T*>(dst_v);
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t s = 0; s < spatial_; ++s) y[r * spatial_ + s] = x[r];
  }

  void backward(const void* diff_dst_v, void* diff_src_v) override {
    const T* dy = static_cast<const T*>(diff_dst_v);
    T* dx = static_cast<T*>(diff_src_v);
    for (int64_t r = 0; r < rows_; ++r) {
      double sum = 0;
      for (int64_t s = 0; s < spatial_; ++s) sum += static_cast<double>(dy[r * spatial_ + s]);
      dx[r] = static_cast<T>(sum);
    }
  }

 private:
  int64_t rows_, spatial_;
};

// The float32 and float64 kernels; make_expand wraps them for bf16 and fp16.
std::unique_ptr<ExpandKernel> float_expand(const ExpandDesc& d) {
  require_float_dtype(d.dtype, "expand");
  if (d.dtype == DType::f64) return std::make_unique<Expand<double>>(d);
  return std::make_unique<Expand<float>>(d);
}

std::unique_ptr<ExpandKernel> make_expand(Backend& /*backend*/, const ExpandDesc& d) {
  if (!is_half(d.dtype)) return float_expand(d);
  ExpandDesc f = d;
  f.dtype = DType::f32;
  return make_half_expand(d, float_expand(f));
}

}  // namespace

CREST_REGISTER_KERNEL(reference_expand, "reference", ExpandKernel, make_expand);

}  // namespace crest::reference
