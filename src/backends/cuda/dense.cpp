// Fully connected layers through cuBLASLt. crest's tensors are row-major and cuBLAS is
// column-major, so each product is written for the transposes: a row-major [r, c] matrix is a
// column-major [c, r] one with leading dimension c.
//
// Each of a layer's three products (forward, backward data, backward weights) is described once,
// when the kernel is made: the operands' types and layouts, the compute type and the epilogue, and
// its algorithm chosen then by cuBLASLt's heuristic within the context's fixed workspace (shared
// with cuBLAS: both run on the one stream, one call after another). A step then queues one
// cublasLtMatmul per product and chooses and allocates nothing, so a recorded step (a CUDA graph)
// holds the same work at every launch. The algorithms are chosen for operands aligned to 16 bytes
// (crest's arena and parameter slices are aligned to 256); an operand less aligned is an error
// naming the product, never a wrong result.
//
// Every product accumulates in float32 (CUBLAS_COMPUTE_32F, or its TF32 form where
// CREST_CUDA_TF32 asks for it). In float32 the forward adds the bias in the product's epilogue
// (CUBLASLT_EPILOGUE_BIAS: the float32 sum plus the bias, rounded once, as a separate add
// computes it). Under mixed precision src, dst and their gradients are bf16 or fp16 and run on
// the tensor cores, the float32 weights are rounded to the 16-bit type in scratch before each
// product that reads them (as the reference's emulation reads them), the float32 bias is added by
// a kernel of its own (the epilogue would read it in the 16-bit type), and the weight gradient
// is written in float32 from the 16-bit operands. The bias gradient is diff_dst's per-column sums
// (channel_sums: in double, a fixed order).
#include <cublasLt.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

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

// The alignment the algorithms are chosen for (cuBLASLt's own default assumes 256).
constexpr uint32_t kOperandAlignment = 16;

// One operand of a product: its type, whether it is read transposed, its leading dimension.
struct Operand {
  cudaDataType_t type;
  cublasOperation_t op;
  int ld;
};

template <typename T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                   const T& value) {
  CREST_CUBLAS(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}

// op(A)[m, k] of a column-major matrix read as `op`: stored [m, k], or [k, m] when transposed.
cublasLtMatrixLayout_t layout(cudaDataType_t type, cublasOperation_t op, int rows, int cols,
                              int ld) {
  const bool transposed = op == CUBLAS_OP_T;
  cublasLtMatrixLayout_t l = nullptr;
  CREST_CUBLAS(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(transposed ? cols : rows),
                                          static_cast<uint64_t>(transposed ? rows : cols), ld));
  return l;
}

// C[m, n] = op(A)[m, k] op(B)[k, n] (column-major, C written over), plus a bias per row of C
// where `bias_epilogue`: described, and its algorithm chosen, once.
class LtProduct {
 public:
  LtProduct(const Context& c, int m, int n, int k, Operand a, Operand b, cudaDataType_t c_type,
            int ldc, cublasComputeType_t compute, bool bias_epilogue, std::string what)
      : what_(std::move(what)) {
    CREST_CUBLAS(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
    set_attribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, a.op);
    set_attribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, b.op);
    if (bias_epilogue) set_attribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    a_ = layout(a.type, a.op, m, k, a.ld);
    b_ = layout(b.type, b.op, k, n, b.ld);
    c_ = layout(c_type, CUBLAS_OP_N, m, n, ldc);
    choose_algorithm(c);
  }
  ~LtProduct() {
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;

  void run(const Context& c, const void* a, const void* b, void* out,
           const void* bias = nullptr) const {
    check_aligned({a, b, out, bias});
    if (bias) set_attribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    const float one = 1.f, zero = 0.f;
    CREST_CUBLAS(cublasLtMatmul(c.cublas_lt, desc_, &one, a, a_, b, b_, &zero, out, c_, out, c_,
                                &algo_, c.cublas_workspace, Context::kCublasWorkspaceBytes,
                                c.stream));
  }

 private:
  void choose_algorithm(const Context& c) {
    cublasLtMatmulPreference_t preference = nullptr;
    CREST_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
    const size_t workspace = Context::kCublasWorkspaceBytes;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    for (const auto a :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(preference, a, &kOperandAlignment,
                                                  sizeof kOperandAlignment);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(c.cublas_lt, desc_, a_, b_, c_, c_, preference, 1,
                                          &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    CREST_CUBLAS(st);
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
      throw_runtime("cuda: cuBLASLt has no algorithm for " + what_);
    algo_ = result.algo;
  }

  void check_aligned(std::initializer_list<const void*> pointers) const {
    for (const void* p : pointers)
      if (reinterpret_cast<uintptr_t>(p) % kOperandAlignment != 0)
        throw_runtime("cuda: " + what_ + " was given an operand at " +
                      std::to_string(reinterpret_cast<uintptr_t>(p)) + ", not aligned to " +
                      std::to_string(kOperandAlignment) + " bytes");
  }

  std::string what_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

class CublasLtDense final : public DenseKernel {
 public:
  CublasLtDense(std::shared_ptr<Context> context, const DenseDesc& d)
      : c_(std::move(context)),
        dtype_(d.dtype),
        n_(static_cast<size_t>(d.n)),
        out_(static_cast<size_t>(d.out_features)),
        weight_count_(static_cast<size_t>(d.in_features) * out_),
        bias_(d.bias),
        bias_in_epilogue_(d.bias && !is_half(d.dtype)) {
    const cudaDataType_t t = cublas_type(d.dtype);
    const cublasComputeType_t compute =
        d.dtype == DType::f32 && c_->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const int n = static_cast<int>(d.n), in = static_cast<int>(d.in_features),
              out = static_cast<int>(d.out_features);
    const std::string shape = " of a dense layer [" + std::to_string(n) + ", " +
                              std::to_string(in) + "] -> [" + std::to_string(n) + ", " +
                              std::to_string(out) + "] (" + dtype_name(d.dtype) + ")";
    // dst[n, out] = src[n, in] W[out, in]^T: column-major dst^T = W^T^T src^T.
    forward_ = std::make_unique<LtProduct>(*c_, out, n, in, Operand{t, CUBLAS_OP_T, in},
                                           Operand{t, CUBLAS_OP_N, in}, t, out, compute,
                                           bias_in_epilogue_, "the forward" + shape);
    // diff_src[n, in] = diff_dst[n, out] W[out, in].
    backward_data_ = std::make_unique<LtProduct>(*c_, in, n, out, Operand{t, CUBLAS_OP_N, in},
                                                 Operand{t, CUBLAS_OP_N, out}, t, in, compute,
                                                 false, "the data gradient" + shape);
    // diff_weights[out, in] (float32) = diff_dst[n, out]^T src[n, in].
    backward_weights_ = std::make_unique<LtProduct>(*c_, in, out, n, Operand{t, CUBLAS_OP_N, in},
                                                    Operand{t, CUBLAS_OP_T, out}, CUDA_R_32F, in,
                                                    compute, false, "the weight gradient" + shape);
  }

  // The weights rounded to the 16-bit type, under mixed precision.
  size_t scratch_bytes() const override {
    return is_half(dtype_) ? weight_count_ * dtype_size(dtype_) : 0;
  }

  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    forward_->run(*c_, weights_as_computed(weights, scratch), src, dst,
                  bias_in_epilogue_ ? bias : nullptr);
    if (bias_ && !bias_in_epilogue_)
      add_channel_bias(dtype_, dst, static_cast<const float*>(bias), n_, out_, 1, c_->stream);
  }

  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    backward_data_->run(*c_, weights_as_computed(weights, scratch), diff_dst, diff_src);
  }

  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* /*scratch*/) override {
    backward_weights_->run(*c_, src, diff_dst, diff_weights);
    if (bias_ && diff_bias)
      channel_sums(dtype_, diff_dst, static_cast<float*>(diff_bias), n_, out_, 1, c_->stream);
  }

 private:
  // The weights in the type the product reads: float32 as they are, else rounded into scratch.
  const void* weights_as_computed(const void* weights, void* scratch) const {
    if (!is_half(dtype_)) return weights;
    convert_elements(DType::f32, weights, dtype_, scratch, weight_count_, c_->stream);
    return scratch;
  }

  std::shared_ptr<Context> c_;
  DType dtype_;
  size_t n_, out_, weight_count_;
  bool bias_, bias_in_epilogue_;
  std::unique_ptr<LtProduct> forward_, backward_data_, backward_weights_;
};

}  // namespace

std::unique_ptr<DenseKernel> make_dense(std::shared_ptr<Context> context, const DenseDesc& d) {
  return std::make_unique<CublasLtDense>(std::move(context), d);
}

}  // namespace crest::cuda
