// Executor: the compiled form of a Graph on one backend, for one batch size. Compiling does every
// expensive thing once (shapes, kernels, layouts and reorders, activation fusion, the memory plan,
// flat parameter buffers); forward()/backward() then only run kernels on planned memory.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/tensor.hpp"
#include "crest/graph/graph.hpp"
#include "crest/graph/memory_plan.hpp"
#include "crest/graph/param_store.hpp"
#include "crest/graph/spatial_split.hpp"
#include "crest/graph/window_axis.hpp"

namespace crest {

namespace compile {
struct Program;
struct Op;
}  // namespace compile

// What a session keeps beside a compiled program, in the memory the program runs on: known before
// anything is allocated, so the memory check (CompileOptions::memory_limit) and the printed plan
// count it with the program's own activations and parameters.
struct MemoryBeside {
  // Programs computing on these parameters, each with its own activations: a pipeline stage's
  // activation sets (CompileOptions::shared_params). Every set's arena is counted.
  int activation_sets = 1;
  // Buffers the size of the trainable parameters and their sideband: the optimizer's state, an
  // accumulation window's sum, the gradient lag's two, a pipeline stage's micro-batch sum.
  int trainable_copies = 0;
  // Buffers the size of all parameters: a pipeline stage's copy of them for recomputation.
  int value_copies = 0;
  // Sets of buffers the size of the program's inputs: the next batch's, copied onto a device
  // while the program reads this one (BatchFeed::stage).
  int input_sets = 0;
};

// A compiled program's memory with what is kept beside it (MemoryBeside), in bytes.
struct PlannedMemory {
  size_t activations = 0;  // every activation set's arena: activations and kernel scratch
  size_t parameters = 0;   // values and gradients
  size_t state = 0;        // MemoryBeside's trainable and value copies
  size_t inputs = 0;       // MemoryBeside's input sets
  size_t total() const { return activations + parameters + state + inputs; }
};

struct CompileOptions {
  int64_t batch = 1;
  DType dtype = DType::f32;  // parameters, optimizer state, losses; every activation without `half`
  // Mixed precision (bf16 or f16): the layers that can (src/graph/compile/assign_precision.cpp)
  // store their activations and compute in it; parameters stay in `dtype` (f32 master weights),
  // and graph inputs (unless half_inputs), losses and marked outputs too. Unset: everything in
  // `dtype`.
  std::optional<DType> half;
  // Under `half`: a float graph input that only 16-bit layers read (no gradient asked, not a
  // marked output) is stored in the 16-bit type itself, so no float32 copy of the batch and no
  // converting reorder live in the arena; the caller writes 16-bit codes into input() (BatchFeed
  // converts a loader's float32 batch). crest train, predict and the benches set it.
  bool half_inputs = false;
  bool training = true;  // false: forward only, no gradients, dropout off
  // false: the graph's loss layers are left out (inference on samples without targets: the
  // prediction alone; the target inputs stay but nothing reads them). Needs training false.
  bool loss = true;
  bool input_grads = false;  // also compute gradients w.r.t. float graph inputs (gradient checks)
  // Gradients w.r.t. these float graph inputs only (a pipeline stage's received values, which
  // it sends gradients back for); input_grads adds every other one.
  std::vector<std::string> grad_inputs{};
  bool fuse = true;   // fuse activations into convolutions where the backend can
  uint64_t seed = 0;  // parameter initialisation and dropout masks
  // The first node's position in the graph it was cut from (a pipeline stage's: crest/graph/
  // pipeline_cut.hpp): dropout masks are drawn per node position, so a stage draws the whole
  // graph's.
  uint64_t first_random_stream = 0;
  // A spatial split (crest/graph/spatial_split.hpp): graph inputs it splits are given as this
  // rank's blocks, and every value is split or whole as its layers allow. Null: nothing is split.
  std::shared_ptr<SpatialSplit> spatial;
  // Under a spatial split, marked outputs that a split layer writes stay this rank's blocks
  // (output() gives the block, output_whole_shape() the whole tensor's shape): the trainer scores
  // its metrics on the blocks and never gathers the prediction. false: they are gathered whole
  // (predict, inference, the engine's callers).
  bool split_outputs = false;
  // Under a spatial split, graph inputs kept whole though they have the grid's spatial axes: a
  // pipeline stage's received values that the stage before holds whole (it gathered them, or
  // they are a spatial mean's output). Their gradients are whole too.
  std::vector<std::string> whole_inputs{};
  // Refuse (crest::Error, input; before the activation arena is allocated) a program whose
  // arena, parameters with their gradients and optimizer state need more than this many bytes;
  // 0: no limit. `memory_limit_source` says where the limit comes from, for the message
  // ("crest.max_memory_gb: this rank's share of the node's memory, 5.8 GiB").
  size_t memory_limit = 0;
  std::string memory_limit_source;
  // What the caller keeps beside the program in the program's memory: counted with it against
  // memory_limit and in Executor::planned_memory().
  MemoryBeside beside{};
  // false: plan only (crest train --dry-run): nothing is allocated for activations, so a plan
  // larger than this machine can be printed; forward() and backward() refuse to run.
  bool allocate = true;
  // With allocate false, also false: the parameters' layout without their buffers (nor their
  // initial values), for a plan whose parameters live elsewhere: a pipeline's whole model on the
  // ranks that hold one stage of it (ParamStore: values() and grads() are null).
  bool allocate_params = true;
  // With allocate false and allocate_params true, also false: the parameters' values without
  // gradient buffers (a pipeline's whole model on rank 0: values and optimizer state for
  // checkpoints; nothing computes on it).
  bool param_gradients = true;
  // Another executor's parameters (values and gradients) to use instead of buffers of its own:
  // that executor compiled the same graph with the same dtype on the same backend, and must
  // outlive this one's use of them (the store shares the buffers, so they live while either
  // does). A pipeline stage's activation sets take turns on one set of parameters: no copies
  // between them, and memory for one. Nothing is initialised: the values are the owner's.
  const ParamStore* shared_params = nullptr;
};

struct OpProfile {
  std::string name, kind;
  double forward_s = 0, backward_s = 0;  // accumulated while profiling is on
  Flops flops;                           // per batch
  std::string implementation;            // Layer::implementation(): what its kernels run
};

// What a scaling model needs of one compiled op (crest plan: docs/scaling.md), in program order.
struct OpFacts {
  std::string name, kind;
  Shape in, out;               // its first input's and first output's shapes, batch included
  Flops flops;                 // per batch; backward_data is 0 where no input gradient is needed
  bool runs_backward = false;  // its backward runs in a training step
  size_t trainable_bytes = 0;  // its trained parameters (their gradients are exchanged)
  std::vector<WindowAxis> windows;  // per spatial axis, for sliding-window layers
};

class Executor {
 public:
  // Compiles `graph` without changing it: the same graph compiles any number of times.
  Executor(const Graph& graph, Backend& backend, const CompileOptions& opts);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Where the caller writes a graph input before a step: the declared layout (e.g. channels-last
  // for the data files), the compile dtype (int32 for integer inputs; the 16-bit type for the
  // inputs CompileOptions::half_inputs narrows), batch included.
  TensorView input(const std::string& name) const;
  // Points graph input `name` at caller-owned memory (a data loader's batch buffer) for the
  // following steps, so a batch is read where the loader decoded it, without a copy. `data` must
  // hold input(name).bytes() in input(name)'s layout and stay valid while steps run; nullptr
  // restores the planned storage. Returns false and changes nothing when the input's storage is
  // shared with another value (an in-place consumer would write into the caller's buffer): the
  // caller then writes into input(name) instead.
  bool bind_input(const std::string& name, const void* data);
  // Whether bind_input(name, ...) would bind (the input's storage is its own).
  bool can_bind_input(const std::string& name) const;
  // A value marked as output (plain or channels-last layout); valid after forward().
  TensorView output(ValueId v) const;
  // The whole tensor's shape of marked output g: output(g)'s own, or the shape whose block it
  // holds where it stays split (CompileOptions::split_outputs).
  Shape output_whole_shape(ValueId g) const;
  // Whether marked output g is held as this rank's block of a spatially split tensor (it stays
  // split: CompileOptions::split_outputs).
  bool output_is_block(ValueId g) const;
  // Gradient of the loss w.r.t. a float graph input (needs CompileOptions::input_grads).
  TensorView input_grad(const std::string& name) const;

  // Runs the forward pass; returns the loss including L2 penalties (0 without a loss):
  // run_forward, then loss(). training=false evaluates (dropout off) on an executor compiled for
  // training.
  double forward(bool training = true);
  // The forward pass alone: the loss and the L2 terms stay in the backend's memory, so on a
  // device nothing waits for them and backward follows at once.
  void run_forward(bool training = true);
  // run_forward in its two parts, so that a training step recorded once may be launched again
  // (crest.cuda_graphs, TrainStep): begin_forward is the host's side (the step count, the loss
  // to read again; a refold, queued, where parameters changed), queue_forward the kernels, the
  // same with the same arguments every step while the inputs' bindings (input_bindings) and the
  // loss scale stay. backward() changes no host state of the executor's.
  void begin_forward(bool training = true);
  void queue_forward(bool training = true);
  // Per graph input: what bind_input bound (null: the planned storage).
  const std::vector<const void*>& input_bindings() const { return input_bindings_; }
  // The last forward's loss including L2 penalties, read back once (later calls return the same
  // value): after backward in a training step, the step's one read besides the finiteness check.
  // Throws what the loss's pass found (a label out of range). A loss on blocks and a sharded
  // weight's L2 term sum over their group here: every rank of it reads at the same point.
  double loss();
  // Sets flag[0] (one value of the executor's dtype in the backend's memory: the gradients'
  // sideband) to 1 where the last forward's loss or an L2 term is not finite, without reading
  // them back; else leaves it.
  void flag_nonfinite_loss(void* flag);
  // Room for `n` more doubles beside the loss's in the backend's memory, read in the same one copy
  // by loss(): a training step queues its update's other facts there after backward (the
  // sideband's flags, the gradients' sum of squares), so it waits once. Returns the first one's
  // index for step_values_at (where to write them) and step_value (what loss() read; write before
  // loss() is called after a forward). Call between steps; a plan-only program only counts them.
  size_t reserve_step_values(size_t n);
  double* step_values_at(size_t index) const;
  double step_value(size_t index) const;
  // Backward pass: fills every parameter gradient (overwritten, not accumulated).
  void backward();
  double last_data_loss() const { return data_loss_; }  // loss()'s, without L2 penalties
  // Dynamic loss scaling (crest/optim/loss_scaler.hpp): backward computes the gradients of
  // `scale` times the loss (the loss layer's gradient and the L2 terms are multiplied by it);
  // forward's loss is unchanged. 1 by default.
  void set_loss_scale(double scale);
  double loss_scale() const { return loss_scale_; }
  // Training forward passes run so far: the counter the dropout masks are drawn from, saved in
  // checkpoints so a resumed run draws the same masks as an uninterrupted one. The kernels read
  // its copy in the backend's memory, which each training forward advances where it lives.
  uint64_t training_steps() const { return step_; }
  void set_training_steps(uint64_t steps);

  // Trainable parameter slots in the order backward() completes their gradients (L2 term
  // included): reverse execution order. The same on every rank for the same graph.
  std::vector<int> gradient_ready_order() const;
  // Called by backward() with each slot, in gradient_ready_order(), as soon as its gradient is
  // final (data-parallel training starts a bucket's allreduce from here). Empty: no calls.
  void set_gradient_ready(std::function<void(int slot)> fn) { gradient_ready_ = std::move(fn); }
  // Synchronised batch norm: every batch_norm layer sums its per-channel statistics over the
  // reducer's group in training forwards and backwards (crest/backends/batch_stat_reducer.hpp).
  // Null (the default) is local batch norm. The reducer must outlive the steps that use it.
  void set_batch_stat_reducer(BatchStatReducer* reducer);

  // The parameters. An inference program with batch norms folded into convolutions
  // (fold_batch_norm) recomputes the folded weights at the next forward after any call of the
  // non-const params(): write parameters through it (load_weights(ex.params(), ...)), or call
  // parameters_changed() after writing through a pointer kept from an earlier call.
  ParamStore& params();
  const ParamStore& params() const;
  void parameters_changed();
  VectorOps& vec() { return *vec_; }
  Backend& backend() { return backend_; }
  const CompileOptions& options() const { return opts_; }
  const MemoryPlan& plan() const;
  // The plan's memory with CompileOptions::beside: what the memory check counts.
  PlannedMemory planned_memory() const;
  size_t arena_bytes() const { return arena_.bytes(); }

  // Flops of one training step (forward + the backward passes actually run) for the batch.
  double training_flops() const;
  double forward_flops() const;
  std::vector<OpFacts> op_facts() const;

  void set_profiling(bool on) { profiling_ = on; }
  bool profiling() const { return profiling_; }
  const std::vector<OpProfile>& profile() const { return profile_; }
  void reset_profile();

  // Human-readable table: one line per layer with output shape, format and parameters.
  std::string summary() const;

 private:
  void bind_run_contexts();
  size_t input_index(const std::string& name) const;  // of the program's inputs; throws if none
  void check_memory_limit() const;                    // CompileOptions::memory_limit
  void scale_param_grads(const compile::Op& op);      // Op::param_grad_scale
  void require_arena() const;                         // a plan-only program cannot run
  void allocate_step_values();
  // Inference: the folded convolutions' weights and biases from the live parameters, when they
  // may have changed since the last forward.
  void refresh_folds();
  bool folds_stale_ = true;
  void finish_gradient(int slot);
  void* block_ptr(int block) const;
  // The element-wise operations for values of `dtype`: the compile dtype's, or the 16-bit ones.
  VectorOps& vec_for(DType dtype) const;

  Backend& backend_;
  CompileOptions opts_;
  std::unique_ptr<VectorOps> vec_;
  std::unique_ptr<VectorOps> half_vec_;      // CompileOptions::half's, when set
  std::unique_ptr<compile::Program> prog_;   // what the compile passes built
  std::vector<const void*> input_bindings_;  // per graph input: caller memory, or null (planned)
  Buffer arena_;
  uint64_t step_ = 0;
  Buffer step_counter_;  // step_ in the backend's memory (RunContext::random)
  // What the loss layer and the L2 terms write each forward (backend memory): doubles.
  Buffer step_values_;
  size_t step_value_count_ = 0;
  size_t reserved_step_values_ = 0;       // reserve_step_values's, at the end
  std::vector<double> step_values_read_;  // their host copy on a device (reused every step)
  const double* values_read_ = nullptr;   // what loss() read: in place on host memory
  bool loss_read_ = true;
  double loss_ = 0;
  double data_loss_ = 0;
  double loss_scale_ = 1;
  bool profiling_ = false;
  std::vector<OpProfile> profile_;
  std::function<void(int)> gradient_ready_;
  BatchStatReducer* batch_stat_reducer_ = nullptr;
};

}  // namespace crest
