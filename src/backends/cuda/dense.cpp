// Fully connected layers through cuBLAS. crest's tensors are row-major and cuBLAS is
// column-major, so each product is written for the transposes: a row-major [r, c] matrix is a
// column-major [c, r] one with leading dimension c.
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {
namespace {

class CublasDense final : public DenseKernel {
 public:
  CublasDense(std::shared_ptr<Context> context, const DenseDesc& d)
      : c_(std::move(context)),
        n_(static_cast<int>(d.n)),
        in_(static_cast<int>(d.in_features)),
        out_(static_cast<int>(d.out_features)),
        bias_(d.bias) {}

  // A column of n ones: the bias gradient is diff_dst's column sums, one matrix-vector product.
  size_t scratch_bytes() const override {
    return bias_ ? sizeof(float) * static_cast<size_t>(n_) : 0;
  }

  // dst[n, out] = src[n, in] W[out, in]^T + bias: column-major dst^T = W^T^T src^T.
  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* /*scratch*/) override {
    const float one = 1.f, zero = 0.f;
    CREST_CUBLAS(cublasSgemm(c_->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out_, n_, in_, &one, f(weights),
                             in_, f(src), in_, &zero, f(dst), out_));
    if (bias_)
      add_row_bias_f32(f(dst), f(bias), static_cast<size_t>(n_), static_cast<size_t>(out_),
                       c_->stream);
  }

  // diff_src[n, in] = diff_dst[n, out] W[out, in].
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* /*scratch*/) override {
    const float one = 1.f, zero = 0.f;
    CREST_CUBLAS(cublasSgemm(c_->cublas, CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, &one, f(weights),
                             in_, f(diff_dst), out_, &zero, f(diff_src), in_));
  }

  // diff_weights[out, in] = diff_dst[n, out]^T src[n, in]; diff_bias[out] = column sums.
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    const float one = 1.f, zero = 0.f;
    CREST_CUBLAS(cublasSgemm(c_->cublas, CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, &one, f(src), in_,
                             f(diff_dst), out_, &zero, f(diff_weights), in_));
    if (bias_ && diff_bias) {
      float* ones = f(scratch);
      fill_f32(ones, 1.f, static_cast<size_t>(n_), c_->stream);
      CREST_CUBLAS(cublasSgemv(c_->cublas, CUBLAS_OP_N, out_, n_, &one, f(diff_dst), out_, ones, 1,
                               &zero, f(diff_bias), 1));
    }
  }

 private:
  static const float* f(const void* p) { return static_cast<const float*>(p); }
  static float* f(void* p) { return static_cast<float*>(p); }

  std::shared_ptr<Context> c_;
  int n_, in_, out_;
  bool bias_;
};

}  // namespace

std::unique_ptr<DenseKernel> make_dense(std::shared_ptr<Context> context, const DenseDesc& d) {
  return std::make_unique<CublasDense>(std::move(context), d);
}

}  // namespace crest::cuda
