// Layer: one node of the static graph. A layer knows its shapes, parameters and what its backward
// pass needs; it creates backend kernels once at compile time and runs them with pointers the
// executor prepared. See docs/adding-a-layer.md.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/enum_table.hpp"
#include "crest/core/shape.hpp"
#include "crest/graph/window_axis.hpp"

namespace crest {

class BatchStatReducer;  // crest/backends/batch_stat_reducer.hpp
class ParamShard;        // crest/graph/param_shard.hpp
class SpatialSplit;      // crest/graph/spatial_split.hpp

// How a layer runs when its input is split spatially among a group of ranks (each holding a
// block of the spatial axes; src/graph/compile/split_spatially.cpp):
//   whole      needs the whole tensor: the compile gathers the blocks first, and the layer runs
//              alike on every rank of the group (dense, flatten, losses; the safe default)
//   pointwise  each output element depends on the same position of the inputs only (activations,
//              add, channel affine, concatenation along channels): runs on the blocks as they are
//   positional pointwise, but each element also depends on its position in the whole tensor
//              (dropout's mask): runs on the blocks, told where its block lies
//              (CreateContext::global_in_shapes and spatial); between a flatten and a
//              feature-matrix layer it runs on the flattened block's features (a rank-2 input),
//              global_in_shapes then holding the unflattened value's whole shape
//   windowed   a sliding window over the spatial axes (convolution, pooling): runs on its block
//              plus a halo from its neighbours, through SpatialSplit's kernels
//   group_statistics  per-channel statistics over the batch and the spatial axes (batch norm):
//              runs on the blocks, its sums added over the spatial group by the executor's
//              BatchStatReducer, which must cover the group in training (the trainer's does)
//   spatial_mean  the mean over the spatial axes (global average pooling): runs on the block,
//              and the compile adds the blocks' means, weighted by their share of the sample,
//              over the group (SpatialSplit::mean_over_group); the output is whole
//   feature_matrix  y = x W^T (+ b) over the features of a rank-2 input (dense): after a
//              flatten of a split value, the flatten runs on the block and the layer on the
//              block's features with its part of W's columns (ParamSpec::shard); the compile sums
//              the parts' products over the group (SpatialSplit::feature_columns). Its rank-2
//              parameter is W; the others (the bias) must be added to the output once
//   position_mean  a loss that is the mean over its prediction's elements of a term of each
//              position's inputs alone (MSE, per-pixel softmax cross-entropy): where its prediction
//              is split, it runs on the blocks of its inputs (a whole target or label map gives
//              each rank its block), each block's mean weighted by its share of the prediction and
//              summed over the group (SpatialSplit::loss_over_blocks); backward is local
// A pointwise layer may also read whole inputs whose spatial extents are all 1 (expand_as's
// image-pool features): they are broadcast over the blocks, their gradient summed over the group
// (SpatialSplit::broadcast).
enum class SpatialRole : uint8_t {
  whole,
  pointwise,
  positional,
  windowed,
  group_statistics,
  spatial_mean,
  feature_matrix,
  position_mean
};

// kaiming_normal: He et al.'s normal of std sqrt(2 / fan_in); kaiming_normal_fan_out: sqrt(2 /
// fan_out), torchvision's ResNet convolutions (kaiming_normal_(mode="fan_out")); he_uniform:
// Keras' U(+-sqrt(6 / fan_in)), the Gordon Bell Tiramisu's.
enum class Init : uint8_t {
  zeros,
  ones,
  glorot_uniform,
  kaiming_normal,
  kaiming_normal_fan_out,
  torch_default,
  he_uniform
};
template <>
inline constexpr EnumEntries<Init, 7> kEnumTable<Init> = {
    {{Init::zeros, "zeros"},
     {Init::ones, "ones"},
     {Init::glorot_uniform, "glorot_uniform"},
     {Init::kaiming_normal, "kaiming_normal"},
     {Init::kaiming_normal_fan_out, "kaiming_normal_fan_out"},
     {Init::torch_default, "torch_default"},
     {Init::he_uniform, "he_uniform"}}};

struct ParamSpec {
  std::string name;  // local name: "weight", "bias"; the graph prefixes the node name
  Shape shape;
  Init init = Init::zeros;
  int64_t fan_in = 1, fan_out = 1;  // for the initialisers
  double l2 = 0.0;                  // L2 penalty: loss += l2 * sum(w^2), grad += 2 l2 w
  bool trainable = true;            // false: non-trained state (e.g. batch-norm running stats)
  // Statistics that evaluation reads and training only estimates (batch norm's running_mean and
  // running_var; not num_batches_tracked): data-parallel training averages them over all ranks
  // before validation, as the reference's BatchNormStatsSynchronize does. Implies !trainable.
  bool eval_stat = false;
  // Set: `shape` is this rank's part of a parameter divided among a group (ParamShard);
  // fan_in/fan_out and the initial values are the whole parameter's.
  std::shared_ptr<const ParamShard> shard{};
};

// What backward reads, so the planner keeps exactly those tensors alive.
struct BackwardNeeds {
  std::vector<bool> input;   // per input: backward reads the forward input
  std::vector<bool> output;  // per output: backward reads the forward output
  // Output 0 may share input 0's storage in forward, and diff input 0 may share diff output 0
  // in backward (element-wise layers that need only their output). The layer must work both
  // ways: it checks whether out == in.
  bool inplace = false;
  // Output 0 is a pure view of input 0 (flatten): forward never writes, so the storage is
  // shared whenever the formats' sizes agree, whatever else reads the input.
  bool view = false;
};

struct Flops {
  double forward = 0, backward_data = 0, backward_weights = 0;
};

// Handed to Layer::create. Shapes include the batch.
struct CreateContext {
  Backend& backend;
  DType dtype;
  bool training;
  std::vector<Shape> in_shapes;
  std::vector<Shape> out_shapes;
  // In: the format each producer delivers. The layer may overwrite an entry with the format it
  // wants; the compile step then inserts a reorder.
  std::vector<MemFormat> in_formats;
  std::vector<MemFormat> out_formats;  // the layer must set one per output
  std::vector<bool> need_input_grad;   // which inputs backward must produce a gradient for
  size_t workspace_bytes = 0;          // kept from forward to backward (e.g. max-pool indices)
  size_t scratch_bytes = 0;            // transient, during one forward or backward call
  // An activation the compile step fused into this layer's output (kind none: no fusion). Only
  // kinds listed in src/graph/compile/choose_fusions.cpp get one; their kernels apply it.
  EltwiseDesc post_op;
  // A convolution whose bias gradient the compile step computes elsewhere (after the max pooling
  // that reads its output: src/graph/compile/route_bias_grad.cpp): its backward leaves the bias
  // gradient alone.
  bool bias_grad_elsewhere = false;
  // Inference: a batch norm after this layer was folded into its parameters
  // (Layer::absorbs_channel_affine); its kernel needs a bias even when the node has none.
  bool folded_affine = false;
  // A windowed or positional layer whose input is split spatially: in_shapes/out_shapes are this
  // rank's blocks, these the whole tensors', and `spatial` makes its kernel (windowed: formats
  // plain or channels-last blocks) or says where the block lies (SpatialSplit::block_start).
  // Empty and null otherwise.
  std::vector<Shape> global_in_shapes{}, global_out_shapes{};
  SpatialSplit* spatial = nullptr;
  std::string name{};  // the node's, for messages
};

// Handed to Layer::forward / backward; built once at compile time (pointers into planned memory),
// so running a step builds nothing.
// The doubles a loss layer's forward may write at RunContext::loss_out: the loss and what it
// found on the way (a label out of range).
inline constexpr size_t kLossValues = 2;

struct RunContext {
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<const void*> diff_out;  // backward: gradient w.r.t. each output
  std::vector<void*> diff_in;         // backward: null where no gradient is needed
  std::vector<void*> params;          // in ParamSpec order, plain layout
  std::vector<void*> grads;           // same order; overwritten (not accumulated) by backward
  void* workspace = nullptr;
  void* scratch = nullptr;
  VectorOps* vec = nullptr;  // element-wise helpers of the executor's backend/dtype
  // Synchronised batch norm: sums per-channel statistics over a group of ranks (null: local).
  BatchStatReducer* batch_stat_reducer = nullptr;
  bool training = true;
  // Where the dropout masks' seed comes from: the run's seed, the layer's random stream and the
  // step counter in the backend's memory (the same every step; VectorOps::dropout_at_step).
  VectorOps::DropoutSeed random;
  // Loss layers: where their forward writes the loss, kLossValues doubles in the backend's memory
  // (the executor's step values), read back only after the step (Layer::loss_from).
  double* loss_out = nullptr;
  // Loss layers multiply the gradient their backward starts with by this (dynamic loss scaling,
  // Executor::set_loss_scale); the loss they report is never scaled.
  double loss_scale = 1;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;  // "conv", "pool", ... as in configs and summaries

  // Output shapes (batch included) from input shapes. Throws crest::Error (input) on a mismatch.
  virtual std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const = 0;
  virtual std::vector<ParamSpec> param_specs(const std::vector<Shape>& /*in*/) const { return {}; }
  virtual BackwardNeeds backward_needs(size_t n_inputs, size_t n_outputs) const {
    return {std::vector<bool>(n_inputs, false), std::vector<bool>(n_outputs, false), false};
  }

  // An activation returns its element-wise op so the compile step can fuse it into a producer
  // (the producer's kernel applies it and the activation's forward is not run) or move it after
  // a max pooling.
  virtual std::optional<EltwiseDesc> activation() const { return std::nullopt; }
  // A producer whose backward also applies its fused activation's backward (after create):
  // the compile step then skips the activation's own (compile/fuse_activation_backward.cpp).
  virtual bool backward_applies_post_op() const { return false; }

  // Traits the compile passes read from the layer itself, so adding a layer touches no pass.
  // Mixed precision (CompileOptions::half, src/graph/compile/assign_precision.cpp): whether this
  // layer computes and stores its activations in the 16-bit type on every backend that accepts
  // the precision. Every layer answers (no default): one that forgot would run in float32 under
  // bf16 without a word. Losses answer false (float32 by design).
  virtual bool computes_in_half() const = 0;
  // Whether the compile step may fuse activation `e` into this layer's output (a post-op its
  // kernel applies, src/graph/compile/choose_fusions.cpp) on `backend`.
  virtual bool accepts_post_op(const Backend& /*backend*/, const EltwiseDesc& /*e*/) const {
    return false;
  }
  // Whether every value of a pooling's output maps to its window's maximum (max pooling): an
  // activation that never decreases commutes with it (compile/swap_activation_pool.cpp), and its
  // backward moves each output-gradient value to one input position, so the per-channel sums of
  // its input and output gradients are equal (compile/route_bias_grad.cpp).
  virtual bool selects_window_maximum() const { return false; }
  // Whether the layer's bias gradient is the per-channel sum of its output gradient and its
  // backward can leave it to another op (CreateContext::bias_grad_elsewhere).
  virtual bool bias_grad_can_move() const { return false; }

  // What the layer does under a spatial split (SpatialRole above), and for a windowed layer its
  // window along each spatial axis for whole tensors `in` and `out` (its halo needs).
  virtual SpatialRole spatial_role() const { return SpatialRole::whole; }
  virtual std::vector<WindowAxis> window_axes(const Shape& /*in*/, const Shape& /*out*/) const {
    return {};
  }

  // Loss layers produce a scalar loss and start backward (no diff_out).
  virtual bool is_loss() const { return false; }
  // A loss layer's loss from the kLossValues doubles its forward wrote at RunContext::loss_out,
  // read back after the step's backward (Executor::loss): throws for what the pass found (a
  // label out of range) and may sum over a group of ranks (a loss on blocks: a collective, so
  // every rank of the group reads at the same point).
  virtual double loss_from(const double* written) const { return written[0]; }
  // A loss that reads its prediction as logits (the softmax is its own): exports then name the
  // prediction `logits` instead of `y`.
  virtual bool reads_logits() const { return false; }
  // Whether input i is a data input whose gradient is never needed (e.g. labels, targets).
  virtual bool input_is_constant(size_t /*i*/) const { return false; }

  // Inference folding (src/graph/compile/fold_batch_norm.cpp). A layer whose inference output is
  // a per-channel affine of its input, y = x * scale[c] + shift[c] (batch norm on its running
  // statistics), says so and computes scale and shift from its parameters (`params` in
  // ParamSpec order, `dtype` the store's: f32 or f64).
  virtual bool inference_is_channel_affine() const { return false; }
  virtual void inference_scale_shift(const std::vector<void*>& /*params*/, DType /*dtype*/,
                                     std::vector<double>& /*scale*/,
                                     std::vector<double>& /*shift*/) const {}
  // A layer that can absorb such an affine applied to its output into its own parameters (a
  // convolution: weights scaled per output channel, a bias added if it had none) returns true,
  // and writes the folded weight and bias into `folded` (its ParamSpec shapes, in `dtype`).
  // Compiled with CreateContext::folded_affine, it then always reads a bias.
  virtual bool absorbs_channel_affine() const { return false; }
  virtual void absorb_channel_affine(const std::vector<void*>& /*params*/,
                                     const std::vector<void*>& /*folded*/, DType /*dtype*/,
                                     const std::vector<double>& /*scale*/,
                                     const std::vector<double>& /*shift*/) const {}

  virtual void create(CreateContext& ctx) = 0;
  virtual void forward(RunContext& ctx) = 0;
  virtual void backward(RunContext& ctx) = 0;

  virtual Flops flops(const std::vector<Shape>& /*in*/, const std::vector<Shape>& /*out*/) const {
    return {};
  }
  // One line for model summaries: options that matter ("3x3x3 s1 p1 +leaky_relu").
  virtual std::string describe() const { return ""; }
  // After create(): the implementation its kernels run (ConvKernel::implementation), for
  // `bench train --profile`; "" where the layer says nothing.
  virtual std::string implementation() const { return ""; }
};

}  // namespace crest
