// The compiled form of a graph while compile() builds it and after: private to src/graph.
//
// compile() runs the passes below in order, one file each (src/graph/compile/), on a Program:
//   instantiate_layers     a fresh Layer per graph node (the graph itself is never changed)
//   swap_activation_pool   act -> max-pool becomes max-pool -> act (same values, smaller tensor)
//   infer_shapes           shapes, parameters, which values need a gradient
//   split_spatially        a spatial split: which values are blocks, gathers before whole layers
//   assign_precision       which nodes compute in the 16-bit type of mixed precision
//   narrow_inputs          graph inputs only 16-bit nodes read are stored 16-bit (half_inputs)
//   fold_batch_norm        inference: conv -> batch norm becomes one conv with folded weights
//   choose_fusions         producer + activation patterns the backend runs as one kernel
//   route_bias_grad        conv -> max-pool: the bias gradient from the pool's smaller gradient
//   create_kernels         kernels in order, reorders where a layer wants another format
//   plan_backward          what each op's backward reads and whether it runs
//   plan_storage           in-place and view sharing, lifetimes, one arena by liveness
// The Executor then binds every pointer once (run contexts) and runs steps.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/channel_sum_kernel.hpp"
#include "crest/graph/executor.hpp"
#include "crest/graph/graph.hpp"
#include "crest/graph/layer.hpp"
#include "crest/graph/memory_plan.hpp"
#include "crest/graph/param_store.hpp"

namespace crest::compile {

// A graph node during one compile: its own Layer, which the passes may rewire (the swap) and
// configure (fusion, kernels).
struct Node {
  std::string name;
  std::string kind;
  std::unique_ptr<Layer> layer;
  std::vector<ValueId> inputs, outputs;
  std::vector<ParamSpec> param_specs;  // infer_shapes; split_spatially may divide some (shard)
  std::vector<int> param_slots;        // into Program::params, in the layer's ParamSpec order
  EltwiseDesc post_op;                 // an activation fused into this node's output
  bool fused_into_producer = false;    // this activation runs inside its producer's kernel
  // route_bias_grad: this conv's bias gradient is summed from a later max pooling's output
  // gradient instead (bias_grad_elsewhere), by that pooling's op (channel_sum_slot: the bias).
  bool bias_grad_elsewhere = false;
  int channel_sum_slot = -1;
  DType dtype = DType::f32;  // assign_precision: what this node computes and stores outputs in
  // fold_batch_norm: this node absorbed the batch norm after it (index into Program::folds; -1:
  // none); the batch norm node is then `folded_away` (no op, no inputs or outputs: this node
  // writes the batch norm's output).
  int fold = -1;
  bool folded_away = false;
  // split_spatially: a windowed node on split values, and the whole tensors' shapes its kernel is
  // made from (its values' shapes are this rank's blocks); a gather the pass inserted (no graph
  // position: it draws no random numbers).
  std::vector<Shape> global_in, global_out;
  bool inserted = false;
  // Its parameter gradients are multiplied by this after its backward: a layer that normalises
  // a split tensor with the group's statistics computes its block's share of them, and the
  // group's size makes the data-parallel average the sample's (as SpatialSplit::conv does).
  double param_grad_scale = 1;
};

struct Value {
  std::string name;
  Shape shape;
  MemFormat fmt;
  int producer = -1;           // op index; -1 for graph inputs
  std::vector<int> consumers;  // op indices (an op appears once per input slot)
  bool needs_grad = false;
  bool pinned = false;  // graph inputs, marked outputs, the loss: alive the whole step
  int graph_input = -1;
  // split_spatially: `shape` is this rank's block of a tensor of `global_shape`.
  bool split = false;
  Shape global_shape;
  int storage = -1;       // plan block of the forward value
  int grad_storage = -1;  // plan block of its gradient
};

struct Op {
  std::string name;
  DType dtype = DType::f32;  // its activations' dtype (RunContext::vec works in it)
  // Which stream of random numbers (dropout masks) the op draws from: its node's position in the
  // graph, so the masks do not depend on the reorders a backend or a precision inserts.
  uint64_t random_stream = 0;
  Layer* layer = nullptr;
  std::vector<int> in, out;
  std::vector<int> param_slots;
  double param_grad_scale = 1;  // Node::param_grad_scale
  BackwardNeeds needs;
  std::vector<bool> need_input_grad;
  size_t workspace_bytes = 0, scratch_bytes = 0;
  int workspace_block = -1;
  // Blocks of the arena for its kernels' transient scratch during its forward and its backward:
  // alive for that one call only, so a large request (oneDNN's bf16 backward-weights kernels
  // copy whole tensors) shares bytes with activations dead at that moment.
  int forward_scratch_block = -1, backward_scratch_block = -1;
  bool run_backward = false;
  bool inplace = false;       // output 0 shares input 0's storage
  bool grad_inplace = false;  // diff input 0 shares diff output 0
  bool fused_into_producer = false;
  bool backward_in_producer = false;  // fuse_activation_backward: its producer's backward runs it
  // Before this op's backward: grad(param slot) = per-channel sum of its output gradient
  // (route_bias_grad; -1: none).
  int channel_sum_slot = -1;
  std::unique_ptr<ChannelSumKernel> channel_sum;
  Flops flops;
  RunContext ctx;
  // After this op's backward: grad(value) += temp block, for values read by several layers.
  struct Accum {
    int value;
    int temp_block;
  };
  std::vector<Accum> accum;
  std::vector<int> temp_grad_block;  // per input slot: -1 = writes the value's gradient directly
};

// An inference program's convolution with a batch norm folded into it: the parameters its kernel
// reads, recomputed from the live parameters before every forward pass (weights loaded after
// compiling, or changed by training a program that shares them, are always seen).
struct FoldedAffine {
  int op = -1;                       // the absorbing op
  const Layer* affine = nullptr;     // the folded batch norm's layer
  std::vector<int> own_slots;        // the absorbing node's parameters
  std::vector<int> affine_slots;     // the batch norm's
  std::vector<Buffer> folded;        // the kernel's weight and bias, in the store's dtype
  std::vector<double> scale, shift;  // per channel, sized at compile time
  // Bound by the executor: the live parameters' and the folded buffers' addresses.
  std::vector<void*> own_params, affine_params, folded_params;
};

struct Program {
  Program(Backend& b, const CompileOptions& o) : backend(b), opts(o) {}
  Backend& backend;
  CompileOptions opts;
  std::vector<GraphInput> inputs;
  std::vector<Node> nodes;                     // the graph's nodes, in execution order
  std::vector<std::unique_ptr<Layer>> layers;  // every op's layer (nodes' and inserted reorders)
  std::vector<std::unique_ptr<Value>> values;  // graph values first, then inserted ones
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<int> graph_to_internal;  // graph ValueId -> value a caller reads (output reorders)
  int loss_op = -1;
  ParamStore params;
  std::vector<bool> finished_in_backward;  // per parameter slot: its op's backward completes it
  MemoryPlan plan;
  std::vector<FoldedAffine> folds;
  // Layers normalise split tensors with statistics summed over the spatial group (a training
  // forward then needs a BatchStatReducer covering it).
  bool split_statistics = false;

  Value& val(int v) { return *values[static_cast<size_t>(v)]; }
  const Value& val(int v) const { return *values[static_cast<size_t>(v)]; }
  Op& op(int i) { return *ops[static_cast<size_t>(i)]; }
  // How many layers read each graph value (+2 for outputs and the loss, which must stay).
  std::vector<int> graph_readers(const Graph& g) const;
  // Appends an op and records it as producer/consumer of its values; returns its index.
  int add_op(std::unique_ptr<Op> op);
  // Appends a value; returns its index.
  int add_value(const std::string& name, const Shape& shape);
};

void instantiate_layers(Program& p, const Graph& g);
void swap_activation_pool(Program& p, const Graph& g);
void infer_shapes(Program& p, const Graph& g);
void split_spatially(Program& p, const Graph& g);
// The parameter store from the nodes' param_specs, initialised (Program::opts.seed).
void store_params(Program& p);
void assign_precision(Program& p);
void narrow_inputs(Program& p, const Graph& g);
void fold_batch_norm(Program& p, const Graph& g);
void choose_fusions(Program& p, const Graph& g);
void route_bias_grad(Program& p, const Graph& g);
void create_kernels(Program& p, const Graph& g);
void plan_backward(Program& p);
void plan_storage(Program& p);
void fuse_activation_backward(Program& p);

// "layer 'name' (kind): message" with the error's kind kept.
[[noreturn]] void rethrow_for_node(const Error& e, const std::string& name,
                                   const std::string& kind);

}  // namespace crest::compile
