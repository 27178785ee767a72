// The kernel of the batch_norm layer (crest/layers/batch_norm.hpp): registered per backend with
// CREST_REGISTER_KERNEL; a backend without one runs the reference backend's.
//
// Semantics are PyTorch's nn.BatchNorm1d/2d/3d: per channel, over N x spatial,
//   training:  y = (x - mean) / sqrt(var + eps) * weight + bias with the batch's mean and biased
//              variance; running_mean = (1 - m) running_mean + m mean, running_var = (1 - m)
//              running_var + m var * n / (n - 1) (unbiased), num_batches_tracked += 1;
//   inference: the same with running_mean and running_var, nothing updated.
// With a BatchStatReducer (synchronised batch norm, SyncBatchNorm) the mean, the variance, the
// count n and the backward sums are the group's; weight and bias gradients stay this rank's own
// (the data-parallel gradient average combines them, as in PyTorch).
#pragma once
#include <array>

#include "crest/backends/batch_stat_reducer.hpp"
#include "crest/backends/kernels.hpp"

namespace crest {

// The one activation every BatchNormKernel must apply as a fused post-op: ReLU with slope 0
// (oneDNN's fuse_norm_relu, cuDNN's BN+activation). The compile step fuses it into a batch_norm
// that is its input's only reader (src/graph/compile/choose_fusions.cpp).
inline bool batch_norm_fuses(const EltwiseDesc& e) {
  return e.kind == EltwiseKind::relu && e.alpha == 0.f;
}

struct BatchNormDesc {
  int spatial_rank = 2;  // 1, 2 or 3
  int64_t n = 1, channels = 1;
  std::array<int64_t, 3> size{1, 1, 1};  // first spatial_rank used
  double eps = 1e-5;
  double momentum = 0.1;
  EltwiseDesc post_op;       // none, or what batch_norm_fuses() accepts
  bool training = true;      // forward_training and backward will be called, not only inference
  bool input_grad = true;    // backward must write diff_src
  MemFormat src_hint;        // the format the producer delivers; the kernel may keep it
  DType dtype = DType::f32;  // of src, dst and their gradients: f32, f64, or bf16 / f16
};

// The layer's parameters, plain [channels] (num_batches_tracked [1]), in the kernel's dtype, or
// float32 for a 16-bit kernel (mixed precision: master weights, and the running statistics stay
// float32 as issue 13 asks). Weight and bias gradients are written in the same dtype.
struct BatchNormParams {
  const void* weight = nullptr;
  const void* bias = nullptr;
  void* running_mean = nullptr;
  void* running_var = nullptr;
  void* num_batches_tracked = nullptr;  // a float counter (PyTorch's is int64)
};

class BatchNormKernel {
 public:
  using Desc = BatchNormDesc;
  static constexpr const char* kName = "batch_norm";
  virtual ~BatchNormKernel() = default;

  // The format of src, dst and both gradients (the compile step reorders the input into it).
  virtual MemFormat format() const = 0;
  // Kept from forward_training to backward: the statistics the batch was normalised with.
  virtual size_t workspace_bytes() const = 0;
  virtual size_t scratch_bytes() const = 0;
  // Whether backward() also applies the fused activation's backward (its mask kept from
  // forward_training). Then the compile step skips the activation's own backward where it would
  // run in place on the same gradient (compile/fuse_activation_backward.cpp); where it still runs,
  // the mask is applied twice, which changes nothing.
  virtual bool backward_applies_post_op() const { return false; }

  // Normalises with the batch's statistics (the group's with a reducer), keeps them in
  // `workspace` and updates the running statistics and the counter in `p`.
  virtual void forward_training(const void* src, const BatchNormParams& p, void* dst,
                                void* workspace, void* scratch, BatchStatReducer* reducer) = 0;
  // Normalises with the running statistics; changes nothing in `p`.
  virtual void forward_inference(const void* src, const BatchNormParams& p, void* dst,
                                 void* scratch) = 0;
  // Gradients of a training forward: of the post-op too where backward_applies_post_op(), else
  // without it (the fused activation's own backward has already run). Overwrites diff_weight and
  // diff_bias; diff_src is null when not needed.
  virtual void backward(const void* src, const void* diff_dst, const BatchNormParams& p,
                        const void* workspace, void* diff_src, void* diff_weight, void* diff_bias,
                        void* scratch, BatchStatReducer* reducer) = 0;
};

}  // namespace crest
