// Fully connected layers through cuBLAS. crest's tensors are row-major and cuBLAS is
// column-major, so each product is written for the transposes: a row-major [r, c] matrix is a
// column-major [c, r] one with leading dimension c.
//
// Every product is cublasGemmEx accumulating in float32 (CUBLAS_COMPUTE_32F, or its TF32 form
// where CREST_CUDA_TF32 asks for it). In float32 that is cublasSgemm's arithmetic; under mixed
// precision src, dst and their gradients are bf16 or fp16 and run on the tensor cores, the float32
// weights are rounded to the 16-bit type in scratch before each product that reads them (as the
// reference's emulation reads them), and the weight gradient is written in float32 from the 16-bit
// operands. The bias gradient is diff_dst's per-column sums (channel_sums: in double, a fixed
// order).
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {
namespace {

cudaDataType_t cublas_type(DType t) {
  switch (t) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

class CublasDense final : public DenseKernel {
 public:
  CublasDense(std::shared_ptr<Context> context, const DenseDesc& d)
      : c_(std::move(context)),
        dtype_(d.dtype),
        type_(cublas_type(d.dtype)),
        compute_(d.dtype == DType::f32 && c_->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                   : CUBLAS_COMPUTE_32F),
        n_(static_cast<int>(d.n)),
        in_(static_cast<int>(d.in_features)),
        out_(static_cast<int>(d.out_features)),
        bias_(d.bias) {}

  // The weights rounded to the 16-bit type, under mixed precision.
  size_t scratch_bytes() const override {
    return is_half(dtype_) ? weight_count() * dtype_size(dtype_) : 0;
  }

  // dst[n, out] = src[n, in] W[out, in]^T + bias: column-major dst^T = W^T^T src^T.
  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, out_, n_, in_, {weights_as_computed(weights, scratch), type_},
         in_, {src, type_}, in_, dst, type_, out_);
    if (bias_)
      add_channel_bias(dtype_, dst, static_cast<const float*>(bias), static_cast<size_t>(n_),
                       static_cast<size_t>(out_), 1, c_->stream);
  }

  // diff_src[n, in] = diff_dst[n, out] W[out, in].
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, {weights_as_computed(weights, scratch), type_},
         in_, {diff_dst, type_}, out_, diff_src, type_, in_);
  }

  // diff_weights[out, in] (float32) = diff_dst[n, out]^T src[n, in]; diff_bias[out] = column sums.
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* /*scratch*/) override {
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, {src, type_}, in_, {diff_dst, type_}, out_,
         diff_weights, CUDA_R_32F, in_);
    if (bias_ && diff_bias)
      channel_sums(dtype_, diff_dst, static_cast<float*>(diff_bias), static_cast<size_t>(n_),
                   static_cast<size_t>(out_), 1, c_->stream);
  }

 private:
  struct Operand {
    const void* data;
    cudaDataType_t type;
  };

  size_t weight_count() const { return static_cast<size_t>(in_) * static_cast<size_t>(out_); }

  // The weights in the type the product reads: float32 as they are, else rounded into scratch.
  const void* weights_as_computed(const void* weights, void* scratch) const {
    if (!is_half(dtype_)) return weights;
    convert_elements(DType::f32, weights, dtype_, scratch, weight_count(), c_->stream);
    return scratch;
  }

  // Column-major C[m, n] = op(A)[m, k] op(B)[k, n], accumulated in float32.
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, Operand a, int lda,
            Operand b, int ldb, void* c, cudaDataType_t c_type, int ldc) const {
    const float one = 1.f, zero = 0.f;
    CREST_CUBLAS(cublasGemmEx(c_->cublas, ta, tb, m, n, k, &one, a.data, a.type, lda, b.data,
                              b.type, ldb, &zero, c, c_type, ldc, compute_, CUBLAS_GEMM_DEFAULT));
  }

  std::shared_ptr<Context> c_;
  DType dtype_;
  cudaDataType_t type_;  // of src, dst and their gradients
  cublasComputeType_t compute_;
  int n_, in_, out_;
  bool bias_;
};

}  // namespace

std::unique_ptr<DenseKernel> make_dense(std::shared_ptr<Context> context, const DenseDesc& d) {
  return std::make_unique<CublasDense>(std::move(context), d);
}

}  // namespace crest::cuda
