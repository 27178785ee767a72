// The kernels that move values: a reorder between plain and channels-last formats of one shape
// (a copy when both are the same layout, else a transpose per sample; either converting between
// float32 and a 16-bit type where the two formats' types differ) and channel concatenation of
// tensors of one layout, one strided 2-D copy per input (plain: a row per sample, that input's
// channels times the spatial extent; channels-last: a row per sample and position, that input's
// channels).
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {
namespace {

class CudaCopy final : public ReorderKernel {
 public:
  CudaCopy(std::shared_ptr<Context> context, size_t bytes)
      : c_(std::move(context)), bytes_(bytes) {}
  void execute(const void* src, void* dst) override {
    if (bytes_ && src != dst)
      CREST_CUDA(cudaMemcpyAsync(dst, src, bytes_, cudaMemcpyDeviceToDevice, c_->stream));
  }

 private:
  std::shared_ptr<Context> c_;
  size_t bytes_;
};

// One layout, another type: each value converted.
class CudaConvert final : public ReorderKernel {
 public:
  CudaConvert(std::shared_ptr<Context> context, const MemFormat& from, const MemFormat& to)
      : c_(std::move(context)),
        from_(from.dtype),
        to_(to.dtype),
        count_(static_cast<size_t>(from.shape.numel())) {}
  void execute(const void* src, void* dst) override {
    convert_elements(from_, src, to_, dst, count_, c_->stream);
  }

 private:
  std::shared_ptr<Context> c_;
  DType from_, to_;
  size_t count_;
};

// Plain (N, C, S) <-> channels-last (N, S, C), S the product of the spatial extents; converting
// where the types differ.
class CudaLayoutTranspose final : public ReorderKernel {
 public:
  CudaLayoutTranspose(std::shared_ptr<Context> context, const MemFormat& from, const MemFormat& to)
      : c_(std::move(context)), from_(from.dtype), to_(to.dtype) {
    const Shape& s = from.shape;
    batch_ = static_cast<size_t>(s[0]);
    const auto channels = static_cast<size_t>(s[1]);
    const int64_t planes = s[0] * s[1];
    const auto spatial = static_cast<size_t>(planes ? s.numel() / planes : 0);
    // The source's matrix per sample: C x S when it is plain, S x C when channels-last.
    const bool from_plain = from.layout == Layout::plain;
    rows_ = from_plain ? channels : spatial;
    cols_ = from_plain ? spatial : channels;
  }
  void execute(const void* src, void* dst) override {
    if (from_ == to_)
      transpose_batched(src, dst, batch_, rows_, cols_, dtype_size(from_), c_->stream);
    else
      transpose_converting(src, from_, dst, to_, batch_, rows_, cols_, c_->stream);
  }

 private:
  std::shared_ptr<Context> c_;
  DType from_, to_;
  size_t batch_ = 1, rows_ = 1, cols_ = 1;
};

class CudaConcat final : public ConcatKernel {
 public:
  CudaConcat(std::shared_ptr<Context> context, const std::vector<MemFormat>& srcs)
      : c_(std::move(context)) {
    Shape shape = srcs.front().shape;
    const Layout layout = srcs.front().layout;
    batch_ = static_cast<size_t>(channel_rows(srcs.front()));
    int64_t channels = 0;
    for (const MemFormat& s : srcs) {
      row_bytes_.push_back(batch_ ? s.bytes / batch_ : 0);
      channels += s.shape[1];
    }
    shape[1] = channels;
    dst_ = plain_format(shape, srcs.front().dtype, layout);
  }

  MemFormat dst_format() const override { return dst_; }

  void forward(const std::vector<const void*>& srcs, void* dst) override {
    const size_t dst_row = batch_ ? dst_.bytes / batch_ : 0;
    size_t offset = 0;
    for (size_t i = 0; i < srcs.size(); ++i) {
      CREST_CUDA(cudaMemcpy2DAsync(static_cast<char*>(dst) + offset, dst_row, srcs[i],
                                   row_bytes_[i], row_bytes_[i], batch_, cudaMemcpyDeviceToDevice,
                                   c_->stream));
      offset += row_bytes_[i];
    }
  }

  void backward(const void* diff_dst, const std::vector<void*>& diff_srcs) override {
    const size_t dst_row = batch_ ? dst_.bytes / batch_ : 0;
    size_t offset = 0;
    for (size_t i = 0; i < diff_srcs.size(); ++i) {
      if (diff_srcs[i])
        CREST_CUDA(cudaMemcpy2DAsync(diff_srcs[i], row_bytes_[i],
                                     static_cast<const char*>(diff_dst) + offset, dst_row,
                                     row_bytes_[i], batch_, cudaMemcpyDeviceToDevice, c_->stream));
      offset += row_bytes_[i];
    }
  }

 private:
  std::shared_ptr<Context> c_;
  size_t batch_ = 1;  // rows: samples, or channels-last samples x positions
  std::vector<size_t> row_bytes_;
  MemFormat dst_;
};

}  // namespace

std::unique_ptr<ReorderKernel> make_reorder(std::shared_ptr<Context> context, const MemFormat& from,
                                            const MemFormat& to) {
  if (from.layout != to.layout)
    return std::make_unique<CudaLayoutTranspose>(std::move(context), from, to);
  if (from.dtype != to.dtype) return std::make_unique<CudaConvert>(std::move(context), from, to);
  return std::make_unique<CudaCopy>(std::move(context), from.bytes);
}

std::unique_ptr<ConcatKernel> make_concat(std::shared_ptr<Context> context,
                                          const std::vector<MemFormat>& srcs) {
  return std::make_unique<CudaConcat>(std::move(context), srcs);
}

}  // namespace crest::cuda
