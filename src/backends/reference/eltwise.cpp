// Reference element-wise activations: y = f(x) over every element, backward from y alone.
#include <cmath>

#include "reference/eltwise_math.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {

void validate_eltwise(const EltwiseDesc& d, const char* context) {
  const std::string where = std::string(context);
  if (!std::isfinite(d.alpha) || !std::isfinite(d.beta))
    throw_input(where + ": activation alpha and beta must be finite");
  // Backward reads the sign of y to pick the slope; a negative slope would flip that sign.
  if (d.kind == EltwiseKind::relu && d.alpha < 0.f)
    throw_input(where + ": relu negative slope (alpha) must be >= 0, got " +
                std::to_string(d.alpha));
  if (d.kind == EltwiseKind::leaky_relu && !(d.alpha > 0.f))
    throw_input(where + ": leaky_relu slope (alpha) must be > 0, got " + std::to_string(d.alpha));
}

namespace {

template <typename T>
class Eltwise final : public EltwiseKernel {
 public:
  Eltwise(const EltwiseDesc& d, int64_t count) : desc_(d), count_(count) {}

  void forward(const void* src, void* dst) override {
    const T* x = static_cast<const T*>(src);
    T* y = static_cast<T*>(dst);
    // Element i is read before it is written, so src == dst is fine.
    for (int64_t i = 0; i < count_; ++i) y[i] = eltwise_forward(desc_, x[i]);
  }

  void backward(const void* dst, const void* diff_dst, void* diff_src) override {
    const T* y = static_cast<const T*>(dst);
    const T* dy = static_cast<const T*>(diff_dst);
    T* dx = static_cast<T*>(diff_src);
    for (int64_t i = 0; i < count_; ++i) dx[i] = dy[i] * eltwise_derivative_from_dst(desc_, y[i]);
  }

 private:
  EltwiseDesc desc_;
  int64_t count_;
};

}  // namespace

std::unique_ptr<EltwiseKernel> make_eltwise(const EltwiseDesc& d, const MemFormat& f) {
  require_float_dtype(f.dtype, "eltwise");
  validate_eltwise(d, "eltwise");
  // Blocked formats may hold padding that must stay zero (sigmoid(0) is not), and only the
  // backend that made them knows where it is.
  if (f.layout == Layout::blocked)
    throw_runtime("eltwise: the reference backend cannot work on blocked format " + f.str());
  const int64_t count = f.shape.numel();
  if (f.dtype == DType::f64) return std::make_unique<Eltwise<double>>(d, count);
  return std::make_unique<Eltwise<float>>(d, count);
}

}  // namespace crest::reference
