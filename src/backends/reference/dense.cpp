// Reference fully connected layer: dst[n, o] = sum_i src[n, i] * w[o, i] + b[o].
#include <string>

#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

template <typename T>
class Dense final : public DenseKernel {
 public:
  explicit Dense(const DenseDesc& d) : d_(d) {}

  size_t scratch_bytes() const override { return 0; }

  void forward(const void* src_v, const void* weights_v, const void* bias_v, void* dst_v,
               void* /*scratch*/) override {
    const T* src = static_cast<const T*>(src_v);
    const T* w = static_cast<const T*>(weights_v);
    CREST_CHECK(!d_.bias || bias_v, "dense with bias called without a bias pointer");
    const T* bias = d_.bias ? static_cast<const T*>(bias_v) : nullptr;
    T* dst = static_cast<T*>(dst_v);
    for (int64_t n = 0; n < d_.n; ++n)
      for (int64_t o = 0; o < d_.out_features; ++o) {
        T acc = bias ? bias[o] : T(0);
        for (int64_t i = 0; i < d_.in_features; ++i)
          acc += src[n * d_.in_features + i] * w[o * d_.in_features + i];
        dst[n * d_.out_features + o] = acc;
      }
  }

  void backward_data(const void* diff_dst_v, const void* weights_v, void* diff_src_v,
                     void* /*scratch*/) override {
    const T* diff_dst = static_cast<const T*>(diff_dst_v);
    const T* w = static_cast<const T*>(weights_v);
    T* diff_src = static_cast<T*>(diff_src_v);
    for (int64_t n = 0; n < d_.n; ++n)
      for (int64_t i = 0; i < d_.in_features; ++i) {
        T acc = T(0);
        for (int64_t o = 0; o < d_.out_features; ++o)
          acc += diff_dst[n * d_.out_features + o] * w[o * d_.in_features + i];
        diff_src[n * d_.in_features + i] = acc;
      }
  }

  void backward_weights(const void* src_v, const void* diff_dst_v, void* diff_weights_v,
                        void* diff_bias_v, void* /*scratch*/) override {
    const T* src = static_cast<const T*>(src_v);
    const T* diff_dst = static_cast<const T*>(diff_dst_v);
    T* dw = static_cast<T*>(diff_weights_v);
    for (int64_t o = 0; o < d_.out_features; ++o)
      for (int64_t i = 0; i < d_.in_features; ++i) {
        T acc = T(0);
        for (int64_t n = 0; n < d_.n; ++n)
          acc += diff_dst[n * d_.out_features + o] * src[n * d_.in_features + i];
        dw[o * d_.in_features + i] = acc;
      }
    if (d_.bias && diff_bias_v) {
      T* db = static_cast<T*>(diff_bias_v);
      for (int64_t o = 0; o < d_.out_features; ++o) {
        T acc = T(0);
        for (int64_t n = 0; n < d_.n; ++n) acc += diff_dst[n * d_.out_features + o];
        db[o] = acc;
      }
    }
  }

 private:
  DenseDesc d_;
};

}  // namespace

std::unique_ptr<DenseKernel> make_dense(const DenseDesc& d) {
  require_float_dtype(d.dtype, "dense");
  if (d.n <= 0 || d.in_features <= 0 || d.out_features <= 0)
    throw_input("dense: batch (" + std::to_string(d.n) + "), in_features (" +
                std::to_string(d.in_features) + ") and out_features (" +
                std::to_string(d.out_features) + ") must be positive");
  if (d.dtype == DType::f64) return std::make_unique<Dense<double>>(d);
  return std::make_unique<Dense<float>>(d);
}

}  // namespace crest::reference
