// bf16 and fp16 on the reference backend, emulated for tests: each kernel widens its 16-bit
// inputs to float, runs the float32 reference kernel, and rounds its 16-bit outputs once, to
// nearest even. The weights are rounded to the 16-bit type on the way in, as oneDNN's 16-bit
// kernels read them; the bias and the weight and bias gradients stay float32 (master weights).
// Batch norm, channel_affine and expand read their parameters unrounded, as oneDNN's 16-bit batch
// norm reads float32 scale and shift, and keep their statistics in float32 (running_mean and
// running_var are parameters: float32 master values).
// That is the arithmetic of a 16-bit kernel that accumulates in float32, so it is the oracle the
// oneDNN backend's bf16 kernels are compared with (tests/ops). The float copies are allocated
// when the kernel is created: the reference backend is slow by design, not allocating per step.
#include <vector>

#include "float16_codes.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

using Floats = std::vector<float>;

void widen_to(const void* src, DType t, Floats& dst) {
  widen_range(static_cast<const uint16_t*>(src), dst.data(), 0, dst.size(), t);
}

void narrow_from(const Floats& src, DType t, void* dst) {
  narrow_range(src.data(), 1.f, static_cast<uint16_t*>(dst), 0, src.size(), t);
}

// The float32 weights as a 16-bit kernel sees them: rounded to the 16-bit type.
void round_through(const void* src, DType t, Floats& dst) {
  const auto* w = static_cast<const float*>(src);
  for (size_t i = 0; i < dst.size(); ++i) {
    uint16_t code = 0;
    narrow_range(w + i, 1.f, &code, 0, 1, t);
    widen_range(&code, &dst[i], 0, 1, t);
  }
}

Floats floats(int64_t count) { return Floats(static_cast<size_t>(count)); }

MemFormat in_dtype(const MemFormat& f, DType t) { return plain_format(f.shape, t, f.layout); }

// A 16-bit kernel with weights (ConvKernel or DenseKernel: the same three passes) around its
// float32 kernel.
template <typename Kernel>
class HalfWeighted : public Kernel {
 public:
  HalfWeighted(DType t, std::unique_ptr<Kernel> inner, int64_t src, int64_t dst, int64_t weights)
      : t_(t),
        inner_(std::move(inner)),
        src_(floats(src)),
        dst_(floats(dst)),
        weights_(floats(weights)) {}
  size_t scratch_bytes() const override { return inner_->scratch_bytes(); }

  void forward(const void* src, const void* w, const void* bias, void* dst,
               void* scratch) override {
    widen_to(src, t_, src_);
    round_through(w, t_, weights_);
    inner_->forward(src_.data(), weights_.data(), bias, dst_.data(), scratch);
    narrow_from(dst_, t_, dst);
  }
  void backward_data(const void* diff_dst, const void* w, void* diff_src, void* scratch) override {
    widen_to(diff_dst, t_, dst_);
    round_through(w, t_, weights_);
    inner_->backward_data(dst_.data(), weights_.data(), src_.data(), scratch);
    narrow_from(src_, t_, diff_src);
  }
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    widen_to(src, t_, src_);
    widen_to(diff_dst, t_, dst_);
    inner_->backward_weights(src_.data(), dst_.data(), diff_weights, diff_bias, scratch);
  }

 protected:
  DType t_;
  std::unique_ptr<Kernel> inner_;

 private:
  Floats src_, dst_, weights_;
};

class HalfConv final : public HalfWeighted<ConvKernel> {
 public:
  using HalfWeighted::HalfWeighted;
  MemFormat src_format() const override { return in_dtype(inner_->src_format(), t_); }
  MemFormat dst_format() const override { return in_dtype(inner_->dst_format(), t_); }
};

int64_t weight_count(const ConvDesc& d) {
  int64_t taps = 1;
  for (int i = 0; i < d.spatial_rank; ++i) taps *= d.kernel[static_cast<size_t>(i)];
  return d.out_channels * (d.in_channels / d.groups) * taps;
}

class HalfPool final : public PoolKernel {
 public:
  explicit HalfPool(const PoolDesc& d) : t_(d.dtype) {
    PoolDesc f = d;
    f.dtype = DType::f32;
    inner_ = make_pool(f);
    src_ = floats(inner_->src_format().shape.numel());
    dst_ = floats(inner_->dst_format().shape.numel());
  }
  MemFormat src_format() const override { return in_dtype(inner_->src_format(), t_); }
  MemFormat dst_format() const override { return in_dtype(inner_->dst_format(), t_); }
  size_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  size_t scratch_bytes() const override { return inner_->scratch_bytes(); }

  void forward(const void* src, void* dst, void* workspace, void* scratch) override {
    widen_to(src, t_, src_);
    inner_->forward(src_.data(), dst_.data(), workspace, scratch);
    narrow_from(dst_, t_, dst);
  }
  void backward(const void* diff_dst, const void* workspace, void* diff_src,
                void* scratch) override {
    widen_to(diff_dst, t_, dst_);
    inner_->backward(dst_.data(), workspace, src_.data(), scratch);
    narrow_from(src_, t_, diff_src);
  }

 private:
  DType t_;
  std::unique_ptr<PoolKernel> inner_;
  Floats src_, dst_;
};

// In place allowed (dst == src, diff_src == diff_dst): every output is written from a float copy.
class HalfEltwise final : public EltwiseKernel {
 public:
  HalfEltwise(const EltwiseDesc& d, const MemFormat& f)
      : t_(f.dtype), x_(floats(f.shape.numel())), dx_(floats(f.shape.numel())) {
    inner_ = make_eltwise(d, plain_format(f.shape, DType::f32, f.layout));
  }
  void forward(const void* src, void* dst) override {
    widen_to(src, t_, x_);
    inner_->forward(x_.data(), x_.data());
    narrow_from(x_, t_, dst);
  }
  void backward(const void* dst, const void* diff_dst, void* diff_src) override {
    widen_to(dst, t_, x_);
    widen_to(diff_dst, t_, dx_);
    inner_->backward(x_.data(), dx_.data(), dx_.data());
    narrow_from(dx_, t_, diff_src);
  }

 private:
  DType t_;
  std::unique_ptr<EltwiseKernel> inner_;
  Floats x_, dx_;
};

class HalfBatchNorm final : public BatchNormKernel {
 public:
  HalfBatchNorm(DType t, std::unique_ptr<BatchNormKernel> inner) : t_(t), inner_(std::move(inner)) {
    const int64_t count = inner_->format().shape.numel();
    x_ = floats(count);
    y_ = floats(count);
    dx_ = floats(count);
  }
  MemFormat format() const override { return in_dtype(inner_->format(), t_); }
  size_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  size_t scratch_bytes() const override { return inner_->scratch_bytes(); }

  void forward_training(const void* src, const BatchNormParams& p, void* dst, void* workspace,
                        void* scratch, BatchStatReducer* reducer) override {
    widen_to(src, t_, x_);
    inner_->forward_training(x_.data(), p, y_.data(), workspace, scratch, reducer);
    narrow_from(y_, t_, dst);
  }
  void forward_inference(const void* src, const BatchNormParams& p, void* dst,
                         void* scratch) override {
    widen_to(src, t_, x_);
    inner_->forward_inference(x_.data(), p, y_.data(), scratch);
    narrow_from(y_, t_, dst);
  }
  void backward(const void* src, const void* diff_dst, const BatchNormParams& p,
                const void* workspace, void* diff_src, void* diff_weight, void* diff_bias,
                void* scratch, BatchStatReducer* reducer) override {
    widen_to(src, t_, x_);
    widen_to(diff_dst, t_, y_);
    inner_->backward(x_.data(), y_.data(), p, workspace, diff_src ? dx_.data() : nullptr,
                     diff_weight, diff_bias, scratch, reducer);
    if (diff_src) narrow_from(dx_, t_, diff_src);
  }

 private:
  DType t_;
  std::unique_ptr<BatchNormKernel> inner_;
  Floats x_, y_, dx_;
};

class HalfChannelAffine final : public ChannelAffineKernel {
 public:
  HalfChannelAffine(const ChannelAffineDesc& d, std::unique_ptr<ChannelAffineKernel> inner)
      : t_(d.dtype),
        inner_(std::move(inner)),
        x_(floats(d.n * d.channels * d.spatial)),
        y_(floats(d.n * d.channels * d.spatial)) {}

  void forward(const void* src, const void* scale, const void* shift, void* dst) override {
    widen_to(src, t_, x_);
    inner_->forward(x_.data(), scale, shift, y_.data());
    narrow_from(y_, t_, dst);
  }
  void backward_data(const void* diff_dst, const void* scale, void* diff_src) override {
    widen_to(diff_dst, t_, y_);
    inner_->backward_data(y_.data(), scale, x_.data());
    narrow_from(x_, t_, diff_src);
  }
  void backward_weights(const void* src, const void* diff_dst, void* diff_scale,
                        void* diff_shift) override {
    widen_to(src, t_, x_);
    widen_to(diff_dst, t_, y_);
    inner_->backward_weights(x_.data(), y_.data(), diff_scale, diff_shift);
  }

 private:
  DType t_;
  std::unique_ptr<ChannelAffineKernel> inner_;
  Floats x_, y_;
};

class HalfExpand final : public ExpandKernel {
 public:
  HalfExpand(const ExpandDesc& d, std::unique_ptr<ExpandKernel> inner)
      : t_(d.dtype),
        inner_(std::move(inner)),
        x_(floats(d.n * d.channels)),
        y_(floats(d.n * d.channels * d.spatial)) {}

  void forward(const void* src, void* dst) override {
    widen_to(src, t_, x_);
    inner_->forward(x_.data(), y_.data());
    narrow_from(y_, t_, dst);
  }
  void backward(const void* diff_dst, void* diff_src) override {
    widen_to(diff_dst, t_, y_);
    inner_->backward(y_.data(), x_.data());
    narrow_from(x_, t_, diff_src);
  }

 private:
  DType t_;
  std::unique_ptr<ExpandKernel> inner_;
  Floats x_, y_;
};

}  // namespace

std::unique_ptr<BatchNormKernel> make_half_batch_norm(const BatchNormDesc& d,
                                                      std::unique_ptr<BatchNormKernel> inner) {
  return std::make_unique<HalfBatchNorm>(d.dtype, std::move(inner));
}
std::unique_ptr<ChannelAffineKernel> make_half_channel_affine(
    const ChannelAffineDesc& d, std::unique_ptr<ChannelAffineKernel> inner) {
  return std::make_unique<HalfChannelAffine>(d, std::move(inner));
}
std::unique_ptr<ExpandKernel> make_half_expand(const ExpandDesc& d,
                                               std::unique_ptr<ExpandKernel> inner) {
  return std::make_unique<HalfExpand>(d, std::move(inner));
}

std::unique_ptr<ConvKernel> make_half_conv(const ConvDesc& d) {
  ConvDesc f = d;
  f.dtype = DType::f32;
  auto inner = make_conv(f);
  const int64_t src = inner->src_format().shape.numel(), dst = inner->dst_format().shape.numel();
  return std::make_unique<HalfConv>(d.dtype, std::move(inner), src, dst, weight_count(d));
}
std::unique_ptr<DenseKernel> make_half_dense(const DenseDesc& d) {
  DenseDesc f = d;
  f.dtype = DType::f32;
  return std::make_unique<HalfWeighted<DenseKernel>>(d.dtype, make_dense(f), d.n * d.in_features,
                                                     d.n * d.out_features,
                                                     d.out_features * d.in_features);
}
std::unique_ptr<PoolKernel> make_half_pool(const PoolDesc& d) {
  return std::make_unique<HalfPool>(d);
}
std::unique_ptr<EltwiseKernel> make_half_eltwise(const EltwiseDesc& d, const MemFormat& f) {
  return std::make_unique<HalfEltwise>(d, f);
}

}  // namespace crest::reference
