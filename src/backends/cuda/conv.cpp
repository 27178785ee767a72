// Convolution (1-D to 3-D, strided, dilated, grouped and depthwise, transposed) through cuDNN's
// legacy API. Each kernel chooses its three algorithms once, at creation (conv_algorithms.hpp:
// measured per problem, or cuDNN's heuristics), among the deterministic ones (the same inputs
// give the same bits, which a captured CUDA-graph step and an uncaptured one must).
//
// A transposed convolution is cuDNN's convolution run the other way: its forward is cuDNN's
// backward-data pass and its backward-data is cuDNN's forward, on the same descriptors, so below
// "conv_in"/"conv_out" name the tensors in cuDNN's forward direction.
//
// cuDNN pads both sides of an axis alike. Unequal padding (DeepCAM's transposed convolutions
// with output padding, a spatial split's local padding) runs on a zero-padded extension of
// conv_in in scratch: cuDNN pads the common part, the extension holds the rest as explicit zeros,
// and a result written into the extension is cropped back.
//
// Under mixed precision src, dst and their gradients are bf16 or fp16 (cuDNN on the tensor
// cores, accumulating in float32). The weights stay float32 (master weights): each pass that
// reads them rounds them into a 16-bit copy in scratch first, as the reference's emulation rounds
// them, and cuDNN's 16-bit weight gradient is widened into the float32 one (the 16-bit rounding
// of each gradient is what torch.autocast's convolutions give too). The bias is added and its
// gradient summed by crest's own kernels in every type (float32 bias; sums in double).
//
// A kernel computes channels-last (NHWC/NDHWC) where its producer hands it channels-last values
// (CREST_CUDA_LAYOUT: context.hpp), as cuDNN's tensor-core kernels read them without transposing:
// the weights, kept plain [k, c, spatial...] as every backend keeps them, are transposed into
// cuDNN's NHWC filter order in scratch for each pass that reads them (rounded to 16 bits on the
// way under mixed precision) and the weight gradient transposed back. A channels-last tensor is
// plain [n x spatial, c] to the bias kernels, whose per-channel sums then add the same values in
// the same order, and to the extension above a sample is a plane with the channels as its
// innermost axis. A 3-D convolution with unequal padding (the extension's copy has 3 axes) and a
// problem cuDNN cannot run channels-last (no deterministic algorithm for a pass, or not
// supported) compute plain, saying why in implementation().
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/conv_algorithms.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/cudnn_descriptors.hpp"

namespace crest::cuda {
namespace {

class ConvolutionDescriptor {
 public:
  // `common`: the padding cuDNN applies on both sides (the rest is in an extension of conv_in).
  ConvolutionDescriptor(const ConvDesc& d, const std::array<int64_t, 3>& common, bool tf32) {
    CREST_CUDNN(cudnnCreateConvolutionDescriptor(&d_));
    const int r = d.spatial_rank;
    const auto pad = cudnn_extents(common.data(), r, 0);
    const auto stride = cudnn_extents(d.stride.data(), r, 1);
    const auto dilation = cudnn_extents(d.dilation.data(), r, 1);
    // Accumulation in float32 whatever the data type (16-bit data included).
    CREST_CUDNN(cudnnSetConvolutionNdDescriptor(
        d_, static_cast<int>(pad.size()), pad.data(), stride.data(), dilation.data(),
        CUDNN_CROSS_CORRELATION, d.dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    CREST_CUDNN(cudnnSetConvolutionGroupCount(d_, static_cast<int>(d.groups)));
    // 16-bit data runs on the tensor cores; float32 stays float32 (the backend agrees with the
    // reference to 1e-5) unless TF32 is asked for (cuDNN's default math permits it).
    CREST_CUDNN(cudnnSetConvolutionMathType(d_, is_half(d.dtype) ? CUDNN_TENSOR_OP_MATH
                                                : tf32           ? CUDNN_DEFAULT_MATH
                                                                 : CUDNN_FMA_MATH));
  }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

// cuDNN's forward direction: conv_in -> conv_out. A convolution reads src and writes dst; a
// transposed one is the same convolution run backwards (dst is its conv_in). The padding applies
// to conv_in.
struct Sides {
  std::array<int64_t, 3> in_size;  // conv_in's extents
  int64_t in_channels, out_channels;
  PaddingExtension pad;
};

Sides sides_of(const ConvDesc& d) {
  Sides s{};
  s.in_size = d.transposed ? d.out_size : d.in_size;
  s.in_channels = d.transposed ? d.out_channels : d.in_channels;
  s.out_channels = d.transposed ? d.in_channels : d.out_channels;
  s.pad = padding_extension(s.in_size, d.pad_lo, d.pad_hi, d.spatial_rank);
  return s;
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

class CudnnConv final : public ConvKernel {
 public:
  // `why_plain`: why a kernel asked for channels-last computes plain ("" otherwise).
  CudnnConv(std::shared_ptr<Context> context, const ConvDesc& d, Layout layout,
            std::string why_plain = "")
      : c_(std::move(context)),
        d_(d),
        s_(sides_of(d)),
        layout_(layout),
        why_plain_(std::move(why_plain)),
        in_(d.dtype, d.n, s_.in_channels, s_.pad.size.data(), d.spatial_rank, layout),
        out_(d.dtype, d.n, s_.out_channels, (d.transposed ? d.in_size : d.out_size).data(),
             d.spatial_rank, layout),
        filter_(d.dtype, filter_k(), filter_c(), d.kernel.data(), d.spatial_rank, layout),
        conv_(d, s_.pad.common, c_->tf32) {
    if (s_.pad.extended)
      extension_bytes_ = aligned(bytes_of(s_.pad.size.data(), d.spatial_rank, d.n, s_.in_channels));
    if (is_half(d.dtype) || channels_last())
      weights_copy_bytes_ = aligned(weight_count() * dtype_size(d.dtype));
    check_extents();
  }

  void choose_algorithms() {
    ConvProblem p = problem();
    gemm_ = gemm_weight_grad();
    if (d_.groups == 1 && d_.dtype == DType::f32 && !channels_last()) {  // im2col reads plain
      p.gemm = &gemm_;
      p.blas = c_->cublas;
    }
    algorithms_ = choose_conv_algorithms(p);
    gemm_.column_bytes = algorithms_.gemm_column_bytes;
  }

  MemFormat src_format() const override { return format_of(d_.in_channels, d_.in_size); }
  MemFormat dst_format() const override { return format_of(d_.out_channels, d_.out_size); }
  size_t scratch_bytes() const override {
    return extension_bytes_ + weights_copy_bytes_ + algorithms_.workspace_bytes;
  }

  void forward(const void* src, const void* weights_f32, const void* bias, void* dst,
               void* scratch) override {
    const float one = 1.f, zero = 0.f;
    const void* weights = weights_as_computed(weights_f32, scratch);
    if (d_.transposed) {
      CREST_CUDNN(cudnnConvolutionBackwardData(c_->cudnn, &one, filter_.get(), weights, out_.get(),
                                               src, conv_.get(), algorithms_.bwd_data,
                                               workspace(scratch), algorithms_.workspace_bytes,
                                               &zero, in_.get(), conv_in_target(dst, scratch)));
      crop_into(dst, scratch);
    } else {
      CREST_CUDNN(cudnnConvolutionForward(c_->cudnn, &one, in_.get(), conv_in(src, scratch),
                                          filter_.get(), weights, conv_.get(), algorithms_.fwd,
                                          workspace(scratch), algorithms_.workspace_bytes, &zero,
                                          out_.get(), dst));
    }
    if (d_.bias)
      add_channel_bias(d_.dtype, dst, static_cast<const float*>(bias), bias_rows(), out_channels(),
                       bias_spatial(), c_->stream);
  }

  void backward_data(const void* diff_dst, const void* weights_f32, void* diff_src,
                     void* scratch) override {
    const float one = 1.f, zero = 0.f;
    const void* weights = weights_as_computed(weights_f32, scratch);
    if (d_.transposed) {
      CREST_CUDNN(cudnnConvolutionForward(c_->cudnn, &one, in_.get(), conv_in(diff_dst, scratch),
                                          filter_.get(), weights, conv_.get(), algorithms_.fwd,
                                          workspace(scratch), algorithms_.workspace_bytes, &zero,
                                          out_.get(), diff_src));
    } else {
      CREST_CUDNN(cudnnConvolutionBackwardData(
          c_->cudnn, &one, filter_.get(), weights, out_.get(), diff_dst, conv_.get(),
          algorithms_.bwd_data, workspace(scratch), algorithms_.workspace_bytes, &zero, in_.get(),
          conv_in_target(diff_src, scratch)));
      crop_into(diff_src, scratch);
    }
  }

  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    const float one = 1.f, zero = 0.f;
    // cuDNN's (x, dy): conv_in and the gradient of conv_out.
    const bool t = d_.transposed;
    const void* x = conv_in(t ? diff_dst : src, scratch);
    const void* dy = t ? src : diff_dst;
    if (algorithms_.bwd_filter_gemm) {
      gemm_.run(c_->cublas, c_->stream, static_cast<const float*>(x), static_cast<const float*>(dy),
                static_cast<float*>(diff_weights), static_cast<float*>(workspace(scratch)));
    } else {
      // A 16-bit or channels-last gradient first goes to the weights copy's place in scratch.
      void* dw = weights_copy_bytes_ ? weights_copy(scratch) : diff_weights;
      CREST_CUDNN(cudnnConvolutionBackwardFilter(
          c_->cudnn, &one, in_.get(), x, out_.get(), dy, conv_.get(), algorithms_.bwd_filter,
          workspace(scratch), algorithms_.workspace_bytes, &zero, filter_.get(), dw));
      if (dw != diff_weights) weight_gradient_from_computed(dw, diff_weights);
    }
    if (d_.bias && diff_bias)
      channel_sums(d_.dtype, diff_dst, static_cast<float*>(diff_bias), bias_rows(), out_channels(),
                   bias_spatial(), c_->stream);
  }

  std::string implementation() const override {
    return "cudnn fwd " + std::to_string(algorithms_.fwd) + " / bwd-data " +
           std::to_string(algorithms_.bwd_data) + " / bwd-filter " +
           (algorithms_.bwd_filter_gemm ? std::string("im2col+cublas")
                                        : std::to_string(algorithms_.bwd_filter)) +
           (algorithms_.measured ? " (measured)" : " (heuristic)") +
           (s_.pad.extended ? " (unequal padding: zero-extended input)" : "") +
           (channels_last()      ? " channels-last"
            : why_plain_.empty() ? ""
                                 : " plain (channels-last: " + why_plain_ + ")");
  }

 private:
  bool channels_last() const { return layout_ == Layout::channels_last; }

  MemFormat format_of(int64_t channels, const std::array<int64_t, 3>& size) const {
    std::vector<int64_t> dims{d_.n, channels};
    dims.insert(dims.end(), size.begin(), size.begin() + d_.spatial_rank);
    return plain_format(Shape(dims), d_.dtype, layout_);
  }

  // Scratch: the conv_in extension first (when the padding is unequal), then the weights in the
  // layout and type cuDNN reads (under mixed precision or channels-last), then cuDNN's workspace.
  void* extension(void* scratch) const { return scratch; }
  void* weights_copy(void* scratch) const { return static_cast<char*>(scratch) + extension_bytes_; }
  void* workspace(void* scratch) const {
    return static_cast<char*>(scratch) + extension_bytes_ + weights_copy_bytes_;
  }
  size_t planes() const { return static_cast<size_t>(d_.n * s_.in_channels); }

  // The layer's dst as plain [rows, out_channels, spatial] for the bias: [n, c, spatial] plain,
  // [n x spatial, c, 1] channels-last.
  size_t out_spatial() const {
    size_t spatial = 1;
    for (int a = 0; a < d_.spatial_rank; ++a)
      spatial *= static_cast<size_t>(d_.out_size[static_cast<size_t>(a)]);
    return spatial;
  }
  size_t bias_rows() const {
    return static_cast<size_t>(d_.n) * (channels_last() ? out_spatial() : 1);
  }
  size_t bias_spatial() const { return channels_last() ? 1 : out_spatial(); }
  size_t out_channels() const { return static_cast<size_t>(d_.out_channels); }

  // cuDNN's filter [k, c, taps...]: k its conv_out channels, c a group's conv_in channels.
  int64_t filter_k() const { return d_.transposed ? d_.in_channels : d_.out_channels; }
  int64_t filter_c() const {
    return (d_.transposed ? d_.out_channels : d_.in_channels) / d_.groups;
  }
  size_t taps() const {
    size_t taps = 1;
    for (int a = 0; a < d_.spatial_rank; ++a)
      taps *= static_cast<size_t>(d_.kernel[static_cast<size_t>(a)]);
    return taps;
  }
  size_t weight_count() const { return static_cast<size_t>(filter_k() * filter_c()) * taps(); }

  // The weights as cuDNN reads them: float32 plain as they are; else rounded to 16 bits and/or
  // transposed to [k, taps, c] into scratch.
  const void* weights_as_computed(const void* weights, void* scratch) const {
    if (!weights_copy_bytes_) return weights;
    void* copy = weights_copy(scratch);
    const auto k = static_cast<size_t>(filter_k()), c = static_cast<size_t>(filter_c());
    if (!channels_last())
      convert_elements(DType::f32, weights, d_.dtype, copy, weight_count(), c_->stream);
    else if (is_half(d_.dtype))
      transpose_converting(weights, DType::f32, copy, d_.dtype, k, c, taps(), c_->stream);
    else
      transpose_batched(weights, copy, k, c, taps(), sizeof(float), c_->stream);
    return copy;
  }

  // cuDNN's weight gradient `dw` (16-bit and/or [k, taps, c]) into the float32 plain one.
  void weight_gradient_from_computed(const void* dw, void* diff_weights) const {
    const auto k = static_cast<size_t>(filter_k()), c = static_cast<size_t>(filter_c());
    if (!channels_last())
      convert_elements(d_.dtype, dw, DType::f32, diff_weights, weight_count(), c_->stream);
    else if (is_half(d_.dtype))
      transpose_converting(dw, d_.dtype, diff_weights, DType::f32, k, taps(), c, c_->stream);
    else
      transpose_batched(dw, diff_weights, k, taps(), c, sizeof(float), c_->stream);
  }

  // The extension's copy as copy_window sees it: planes of conv_in's spatial extents, or, for a
  // channels-last tensor, a plane per sample with the channels as one more, unpadded, innermost
  // axis (so a channels-last extension has at most 2 spatial axes).
  struct WindowCopy {
    std::array<int64_t, 3> size, extended, offset;
    int rank;
    size_t planes;
  };
  WindowCopy window_copy() const {
    WindowCopy w{s_.in_size, s_.pad.size, s_.pad.offset, d_.spatial_rank, planes()};
    if (!channels_last()) return w;
    const auto channels_axis = static_cast<size_t>(d_.spatial_rank);
    w.size[channels_axis] = w.extended[channels_axis] = s_.in_channels;
    w.offset[channels_axis] = 0;
    w.rank += 1;
    w.planes = static_cast<size_t>(d_.n);
    return w;
  }

  // What cuDNN reads as conv_in: `t` itself, or its zero-padded extension.
  const void* conv_in(const void* t, void* scratch) const {
    if (!s_.pad.extended) return t;
    const WindowCopy w = window_copy();
    copy_window(d_.dtype, t, w.size, extension(scratch), w.extended, w.offset, w.rank, w.planes,
                c_->stream);
    return extension(scratch);
  }
  // Where cuDNN writes conv_in: `t` itself, or the extension, which crop_into() copies into t.
  void* conv_in_target(void* t, void* scratch) const {
    return s_.pad.extended ? extension(scratch) : t;
  }
  void crop_into(void* t, void* scratch) const {
    if (!s_.pad.extended) return;
    const WindowCopy w = window_copy();
    const std::array<int64_t, 3> back{-w.offset[0], -w.offset[1], -w.offset[2]};
    copy_window(d_.dtype, extension(scratch), w.extended, t, w.size, back, w.rank, w.planes,
                c_->stream);
  }

  // The conv_out extents cuDNN derives from conv_in must be the descriptor's (it cannot
  // express every transposed convolution's output padding otherwise).
  void check_extents() const {
    const auto& want = d_.transposed ? d_.in_size : d_.out_size;
    std::array<int, 5> got{};
    const int dims = std::max(d_.spatial_rank, 2) + 2;
    CREST_CUDNN(cudnnGetConvolutionNdForwardOutputDim(conv_.get(), in_.get(), filter_.get(), dims,
                                                      got.data()));
    for (int i = 0; i < d_.spatial_rank; ++i)
      if (got[static_cast<size_t>(i) + 2] != want[static_cast<size_t>(i)])
        throw_usage("the cuda backend cannot run this convolution: cuDNN derives extent " +
                    std::to_string(got[static_cast<size_t>(i) + 2]) + " on spatial axis " +
                    std::to_string(i) + " where the layer has " +
                    std::to_string(want[static_cast<size_t>(i)]));
  }

  // Every field that defines the problem, for the algorithm cache.
  std::string problem_key(bool fwd, bool bwd_data, bool bwd_filter) const {
    std::string k = std::string(dtype_name(d_.dtype)) + (c_->tf32 ? " tf32" : "") +
                    (channels_last() ? " nhwc" : "") + " n" + std::to_string(d_.n) + " c" +
                    std::to_string(s_.in_channels) + ">" + std::to_string(s_.out_channels) + " g" +
                    std::to_string(d_.groups) + (d_.transposed ? " t" : "") + " passes" +
                    std::to_string(fwd) + std::to_string(bwd_data) + std::to_string(bwd_filter);
    for (size_t a = 0; a < static_cast<size_t>(d_.spatial_rank); ++a)
      k += " [" + std::to_string(s_.pad.size[a]) + " k" + std::to_string(d_.kernel[a]) + " s" +
           std::to_string(d_.stride[a]) + " d" + std::to_string(d_.dilation[a]) + " p" +
           std::to_string(s_.pad.common[a]) + "]";
    return k;
  }

  size_t bytes_of(const int64_t* extents, int rank, int64_t n, int64_t channels) const {
    int64_t e = n * channels;
    for (int a = 0; a < rank; ++a) e *= extents[a];
    return static_cast<size_t>(e) * dtype_size(d_.dtype);
  }

  // The weight gradient as im2col and matrix products, in cuDNN's forward direction.
  GemmWeightGrad gemm_weight_grad() const {
    GemmWeightGrad g;
    g.rank = d_.spatial_rank;
    g.n = d_.n;
    g.in_channels = s_.in_channels;
    g.out_channels = s_.out_channels;
    g.in_size = s_.pad.size;
    g.out_size = d_.transposed ? d_.in_size : d_.out_size;
    g.kernel = d_.kernel;
    g.stride = d_.stride;
    g.dilation = d_.dilation;
    g.pad = s_.pad.common;
    return g;
  }

  // The problem in cuDNN's forward direction, for choosing its algorithms.
  ConvProblem problem() const {
    ConvProblem p;
    p.handle = c_->cudnn;
    p.in = in_.get();
    p.out = out_.get();
    p.filter = filter_.get();
    p.conv = conv_.get();
    // The passes that run: a transposed layer's forward is cuDNN's backward data, and so on.
    p.fwd = d_.transposed ? d_.training && d_.data_grad : true;
    p.bwd_data = d_.transposed ? true : d_.training && d_.data_grad;
    p.bwd_filter = d_.training;
    const int r = d_.spatial_rank;
    p.in_bytes = bytes_of(s_.pad.size.data(), r, d_.n, s_.in_channels);
    p.out_bytes =
        bytes_of((d_.transposed ? d_.in_size : d_.out_size).data(), r, d_.n, s_.out_channels);
    p.filter_bytes = bytes_of(d_.kernel.data(), r, s_.out_channels, s_.in_channels / d_.groups);
    p.key = problem_key(p.fwd, p.bwd_data, p.bwd_filter);
    p.tuned = c_->tuned.get();
    return p;
  }

  std::shared_ptr<Context> c_;
  ConvDesc d_;
  Sides s_;
  Layout layout_;              // of src, dst and their gradients: plain or channels-last
  std::string why_plain_;      // why channels-last was asked for and not taken
  TensorDescriptor in_, out_;  // conv_in (extended), conv_out
  FilterDescriptor filter_;
  ConvolutionDescriptor conv_;
  ConvAlgorithms algorithms_;
  GemmWeightGrad gemm_;  // used when algorithms_.bwd_filter_gemm
  size_t extension_bytes_ = 0, weights_copy_bytes_ = 0;
};

}  // namespace

Support conv_support(const ConvDesc& d) {
  if (d.dtype != DType::f32 && !is_half(d.dtype))
    return Support::no("the cuda backend's convolutions run float32, bf16 or fp16, not " +
                       dtype_name(d.dtype));
  for (int i = 0; i < d.spatial_rank; ++i)
    if (d.pad_lo[static_cast<size_t>(i)] < 0 || d.pad_hi[static_cast<size_t>(i)] < 0)
      return Support::no("the cuda backend cannot crop a convolution's input (negative padding " +
                         std::to_string(d.pad_lo[static_cast<size_t>(i)]) + ", " +
                         std::to_string(d.pad_hi[static_cast<size_t>(i)]) + " on axis " +
                         std::to_string(i) + ")");
  if (d.post_op.kind != EltwiseKind::none)
    return Support::no("the cuda backend fuses no activation into a convolution");
  return Support::yes();
}

// Channels-last where the layout policy asks for it and cuDNN can run it, else plain.
std::unique_ptr<ConvKernel> make_conv(std::shared_ptr<Context> context, const ConvDesc& d,
                                      const MemFormat& hint) {
  std::string why_plain;
  if (computed_layout(*context, hint, d.dtype) == Layout::channels_last) {
    if (sides_of(d).pad.extended && d.spatial_rank == 3) {
      why_plain = "unequal padding of a 3-D convolution";
    } else {
      try {
        auto k = std::make_unique<CudnnConv>(context, d, Layout::channels_last);
        k->choose_algorithms();
        return k;
      } catch (const CudnnUnsupported& e) {
        why_plain = e.what();
      }
    }
  }
  auto k = std::make_unique<CudnnConv>(std::move(context), d, Layout::plain, why_plain);
  k->choose_algorithms();
  return k;
}

}  // namespace crest::cuda
