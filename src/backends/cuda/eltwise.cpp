// Activations as a kernel family: the launches of elementwise.cu over a whole tensor, in its dtype.
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {
namespace {

class CudaEltwise final : public EltwiseKernel {
 public:
  CudaEltwise(std::shared_ptr<Context> context, const EltwiseDesc& d, const MemFormat& f)
      : c_(std::move(context)),
        d_(d),
        dtype_(f.dtype),
        count_(static_cast<size_t>(f.shape.numel())) {}

  void forward(const void* src, void* dst) override {
    eltwise_forward(d_, dtype_, src, dst, count_, c_->stream);
  }
  void backward(const void* dst, const void* diff_dst, void* diff_src) override {
    eltwise_backward(d_, dtype_, dst, diff_dst, diff_src, count_, c_->stream);
  }

 private:
  std::shared_ptr<Context> c_;
  EltwiseDesc d_;
  DType dtype_;  // float32, bf16 or fp16
  size_t count_;
};

}  // namespace

std::unique_ptr<EltwiseKernel> make_eltwise(std::shared_ptr<Context> context, const EltwiseDesc& d,
                                            const MemFormat& f) {
  return std::make_unique<CudaEltwise>(std::move(context), d, f);
}

}  // namespace crest::cuda
