// The Executor: compile() through the passes of src/graph/compile/ (program.hpp lists them),
// then every pointer bound once into run contexts, so a step builds nothing.
#include "crest/graph/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "compile/program.hpp"
#include "crest/core/error.hpp"
#include "crest/core/units.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest {

using compile::Op;
using compile::Value;

Executor::Executor(const Graph& graph, Backend& backend, const CompileOptions& opts)
    : backend_(backend), opts_(opts) {
  if (opts.batch < 1) throw_usage("batch size must be >= 1");
  if (opts.training && !opts.loss) throw_usage("a training program needs the graph's loss");
  if (!backend.supports(opts.dtype))
    throw_usage("backend '" + backend.name() + "' does not support dtype " +
                dtype_name(opts.dtype));
  if (opts.half) {
    if (!is_half(*opts.half) || opts.dtype != DType::f32)
      throw_usage("mixed precision computes in bf16 or f16 over float32 parameters, not " +
                  dtype_name(*opts.half) + " over " + dtype_name(opts.dtype));
    if (const Support s = backend.supports_dtype(*opts.half); !s)
      throw_usage("backend '" + backend.name() + "' cannot compute in " + dtype_name(*opts.half) +
                  ": " + s.reason);
    half_vec_ = backend.vector_ops(*opts.half);
  }
  vec_ = backend.vector_ops(opts.dtype);
  prog_ = std::make_unique<compile::Program>(backend, opts);
  compile::instantiate_layers(*prog_, graph);
  compile::swap_activation_pool(*prog_, graph);
  compile::infer_shapes(*prog_, graph);
  compile::split_spatially(*prog_, graph);
  compile::store_params(*prog_);
  compile::assign_precision(*prog_);
  compile::narrow_inputs(*prog_, graph);
  compile::fold_batch_norm(*prog_, graph);
  compile::choose_fusions(*prog_, graph);
  compile::route_bias_grad(*prog_, graph);
  compile::create_kernels(*prog_, graph);
  compile::plan_backward(*prog_);
  compile::plan_storage(*prog_);
  compile::fuse_activation_backward(*prog_);
  const MemoryPlan& plan = prog_->plan;
  check_memory_limit();
  if (opts.allocate) {
    arena_ = named_buffer("the model's activations and kernel scratch",
                          align_up(plan.arena_bytes, 256) + 256, backend.memory());
    allocate_step_values();
    step_counter_ = named_buffer("the training step counter", sizeof(uint64_t), backend.memory());
    backend.memory().memset(step_counter_.data(), 0, sizeof(uint64_t));
  }
  bind_run_contexts();
}

Executor::~Executor() = default;

PlannedMemory Executor::planned_memory() const {
  const MemoryBeside& beside = opts_.beside;
  const ParamStore& params = prog_->params;
  size_t inputs = 0;
  for (size_t i = 0; i < prog_->inputs.size(); ++i) inputs += prog_->values[i]->fmt.bytes;
  PlannedMemory m;
  m.activations =
      static_cast<size_t>(std::max(1, beside.activation_sets)) * prog_->plan.arena_bytes;
  m.parameters = 2 * params.bytes();
  m.state = static_cast<size_t>(beside.trainable_copies) *
                (params.trainable_bytes() + ParamStore::kSidebandBytes) +
            static_cast<size_t>(beside.value_copies) * params.bytes();
  m.inputs = static_cast<size_t>(beside.input_sets) * inputs;
  return m;
}

void Executor::check_memory_limit() const {
  const size_t limit = opts_.memory_limit;
  const PlannedMemory m = planned_memory();
  if (limit == 0 || m.total() <= limit) return;
  const auto gib = [](size_t b) { return human_bytes(static_cast<double>(b)); };
  const int sets = opts_.beside.activation_sets;
  std::string parts = "activations and kernel scratch " + gib(m.activations);
  if (sets > 1) parts += " (" + std::to_string(sets) + " sets)";
  parts += ", parameters and gradients " + gib(m.parameters);
  if (m.state > 0)
    parts += (opts_.beside.value_copies > 0 ? ", optimizer state and parameter copies "
                                            : ", optimizer state ") +
             gib(m.state);
  if (m.inputs > 0) parts += ", the next batch's inputs " + gib(m.inputs);
  throw_input(opts_.memory_limit_source + ": the compiled program needs " + gib(m.total()) + " (" +
              parts + ") but may use " + gib(limit) +
              "; split the samples among more ranks (dist.spatial), lower data.batch_size, " +
              (sets > 1 ? "recompute the activations instead of keeping a set per micro-batch "
                          "(dist.pipeline.recompute), "
                        : "") +
              "or run fewer ranks per node");
}

void Executor::set_training_steps(uint64_t steps) {
  step_ = steps;
  if (step_counter_.data() != nullptr)  // a plan-only program runs no step
    vec_->set_counter(static_cast<uint64_t*>(step_counter_.data()), steps);
}

void Executor::require_arena() const {
  if (!arena_.data())
    throw_usage("this program was compiled to plan only (CompileOptions::allocate is false)");
}

ParamStore& Executor::params() {
  folds_stale_ = true;  // the caller may write parameters: the next forward refolds
  return prog_->params;
}
const ParamStore& Executor::params() const { return prog_->params; }

void Executor::parameters_changed() { folds_stale_ = true; }
const MemoryPlan& Executor::plan() const { return prog_->plan; }

void* Executor::block_ptr(int block) const {
  // Null without an arena (a plan-only program): its pointers are never used.
  return block < 0 || !arena_.data() ? nullptr
                                     : static_cast<char*>(arena_.data()) +
                                           prog_->plan.blocks[static_cast<size_t>(block)].offset;
}

VectorOps& Executor::vec_for(DType dtype) const {
  if (half_vec_ && dtype == half_vec_->dtype()) return *half_vec_;
  return *vec_;
}

void Executor::bind_run_contexts() {
  auto val = [&](int v) -> Value& { return prog_->val(v); };
  profile_.clear();
  for (auto& o : prog_->ops) {
    Op& op = *o;
    RunContext& c = op.ctx;
    c = RunContext{};
    for (int v : op.in) c.in.push_back(block_ptr(val(v).storage));
    for (int v : op.out) c.out.push_back(block_ptr(val(v).storage));
    for (int v : op.out)
      c.diff_out.push_back(val(v).needs_grad ? block_ptr(val(v).grad_storage) : nullptr);
    for (size_t k = 0; k < op.in.size(); ++k) {
      void* d = nullptr;
      if (op.run_backward && op.need_input_grad[k])
        d = op.temp_grad_block[k] >= 0 ? block_ptr(op.temp_grad_block[k])
                                       : block_ptr(val(op.in[k]).grad_storage);
      c.diff_in.push_back(d);
    }
    for (int s : op.param_slots) {
      c.params.push_back(prog_->params.value(static_cast<size_t>(s)).data());
      c.grads.push_back(prog_->params.grad(static_cast<size_t>(s)).data());
    }
    c.workspace = block_ptr(op.workspace_block);
    c.scratch = block_ptr(op.forward_scratch_block);  // backward() points it at its own block
    c.vec = &vec_for(op.dtype);
    c.batch_stat_reducer = batch_stat_reducer_;
    c.loss_scale = loss_scale_;
    c.training = opts_.training;
    c.random = {opts_.seed, op.random_stream, static_cast<const uint64_t*>(step_counter_.data())};
    profile_.push_back({op.name, op.layer->kind(), 0, 0, op.flops, op.layer->implementation()});
  }
  if (prog_->loss_op >= 0 && step_values_.data() != nullptr)
    prog_->op(prog_->loss_op).ctx.loss_out = static_cast<double*>(step_values_.data());
  // A folded convolution's kernel reads the folded weight and bias instead of its own. The
  // parameter buffers never move, so the pointers the refresh reads are fixed here too.
  for (compile::FoldedAffine& f : prog_->folds) {
    f.own_params.clear();
    f.affine_params.clear();
    for (int s : f.own_slots)
      f.own_params.push_back(prog_->params.value(static_cast<size_t>(s)).data());
    for (int s : f.affine_slots)
      f.affine_params.push_back(prog_->params.value(static_cast<size_t>(s)).data());
    f.folded_params = {f.folded[0].data(), f.folded[1].data()};
    prog_->op(f.op).ctx.params = f.folded_params;
  }
}

namespace {

// The loss layer's values and the L2 terms' sums of squares: the step values before the reserved.
size_t loss_value_count(const ParamStore& params) {
  size_t values = kLossValues;
  for (const auto& slot : params.slots()) values += slot.spec.l2 > 0 ? 1 : 0;
  return values;
}

}  // namespace

// The loss layer's kLossValues doubles, one sum of squares per parameter with an L2 term, then
// the reserved ones (reserve_step_values), zeroed once: a loss that writes nothing there (a
// pipeline stage's upstream gradient) reads 0.
void Executor::allocate_step_values() {
  const size_t values = loss_value_count(prog_->params) + reserved_step_values_;
  step_values_ = named_buffer("the step's loss values", values * sizeof(double), backend_.memory());
  backend_.memory().memset(step_values_.data(), 0, step_values_.bytes());
  step_value_count_ = values;
  if (prog_->loss_op >= 0)
    prog_->op(prog_->loss_op).ctx.loss_out = static_cast<double*>(step_values_.data());
  loss_read_ = true;  // nothing to read until the next forward
}

size_t Executor::reserve_step_values(size_t n) {
  const size_t first = loss_value_count(prog_->params) + reserved_step_values_;
  reserved_step_values_ += n;
  if (arena_.data() != nullptr) allocate_step_values();  // a plan-only program holds none
  return first;
}

double* Executor::step_values_at(size_t index) const {
  CREST_CHECK(index < step_value_count_, "a step value beyond those reserved");
  return static_cast<double*>(step_values_.data()) + index;
}

double Executor::step_value(size_t index) const {
  CREST_CHECK(index < step_value_count_ && loss_read_ && values_read_ != nullptr,
              "a step value is read by loss(), after the forward pass");
  return values_read_[index];
}

void Executor::refresh_folds() {
  if (!folds_stale_) return;
  folds_stale_ = false;
  for (compile::FoldedAffine& f : prog_->folds) {
    f.affine->inference_scale_shift(f.affine_params, prog_->params.dtype(), f.scale, f.shift);
    prog_->op(f.op).layer->absorb_channel_affine(f.own_params, f.folded_params,
                                                 prog_->params.dtype(), f.scale, f.shift);
  }
}

void Executor::set_batch_stat_reducer(BatchStatReducer* reducer) {
  batch_stat_reducer_ = reducer;
  for (auto& op : prog_->ops) op->ctx.batch_stat_reducer = reducer;
}

void Executor::set_loss_scale(double scale) {
  loss_scale_ = scale;
  for (auto& op : prog_->ops) op->ctx.loss_scale = scale;
}

TensorView Executor::input(const std::string& name) const {
  const size_t i = input_index(name);
  const Value& v = *prog_->values[i];
  void* data = i < input_bindings_.size() && input_bindings_[i]
                   ? const_cast<void*>(input_bindings_[i])
                   : block_ptr(v.storage);
  return TensorView(data, {v.shape, v.fmt.dtype, backend_.device(), v.fmt.layout});
}

size_t Executor::input_index(const std::string& name) const {
  for (size_t i = 0; i < prog_->inputs.size(); ++i)
    if (prog_->inputs[i].name == name) return i;
  throw_usage("the model has no input named '" + name + "'");
}

bool Executor::can_bind_input(const std::string& name) const {
  const size_t i = input_index(name);
  const Value& v = *prog_->values[i];
  for (size_t u = 0; u < prog_->values.size(); ++u)
    if (u != i && prog_->values[u]->storage == v.storage) return false;
  return true;
}

bool Executor::bind_input(const std::string& name, const void* data) {
  if (!can_bind_input(name)) return false;
  const size_t i = input_index(name);
  const Value& v = *prog_->values[i];
  const void* p = data ? data : block_ptr(v.storage);
  for (auto& op : prog_->ops)
    for (size_t k = 0; k < op->in.size(); ++k)
      if (op->in[k] == static_cast<int>(i)) op->ctx.in[k] = p;
  input_bindings_.resize(prog_->inputs.size(), nullptr);
  input_bindings_[i] = data;
  return true;
}

TensorView Executor::input_grad(const std::string& name) const {
  const Value& v = *prog_->values[input_index(name)];
  if (v.grad_storage < 0) throw_usage("no gradient is computed for input '" + name + "'");
  return TensorView(block_ptr(v.grad_storage),
                    {v.shape, v.fmt.dtype, backend_.device(), v.fmt.layout});
}

TensorView Executor::output(ValueId g) const {
  if (g < 0 || static_cast<size_t>(g) >= prog_->graph_to_internal.size())
    throw_usage("no such value");
  const Value& v =
      *prog_->values[static_cast<size_t>(prog_->graph_to_internal[static_cast<size_t>(g)])];
  if (!v.pinned || v.storage < 0) throw_usage("value '" + v.name + "' was not marked as an output");
  return TensorView(block_ptr(v.storage), {v.shape, v.fmt.dtype, backend_.device(), v.fmt.layout});
}

Shape Executor::output_whole_shape(ValueId g) const {
  const TensorView out = output(g);
  const Value& v =
      *prog_->values[static_cast<size_t>(prog_->graph_to_internal[static_cast<size_t>(g)])];
  return v.split ? v.global_shape : out.shape();
}

bool Executor::output_is_block(ValueId g) const {
  output(g);  // checks that g is a marked output
  return prog_->values[static_cast<size_t>(prog_->graph_to_internal[static_cast<size_t>(g)])]
      ->split;
}

double Executor::forward(bool training) {
  run_forward(training);
  return loss();
}

void Executor::run_forward(bool training) {
  begin_forward(training);
  queue_forward(training);
}

void Executor::begin_forward(bool training) {
  require_arena();
  training = training && opts_.training;
  if (training && prog_->split_statistics && !batch_stat_reducer_)
    throw_usage(
        "dist.spatial: batch norm runs on the spatial group's blocks and needs the group's "
        "statistics; set a BatchStatReducer over (at least) the group "
        "(Executor::set_batch_stat_reducer), as crest train does");
  if (training) ++step_;  // queue_forward increments its copy in the backend's memory
  refresh_folds();
  if (prog_->loss_op >= 0) loss_read_ = false;
}

void Executor::queue_forward(bool training) {
  using clock = std::chrono::steady_clock;
  require_arena();
  training = training && opts_.training;
  if (training)  // the dropout masks' counter, where the kernels read it
    vec_->increment_counter(static_cast<uint64_t*>(step_counter_.data()));
  for (size_t i = 0; i < prog_->ops.size(); ++i) {
    Op& op = *prog_->ops[i];
    op.ctx.training = training;
    op.ctx.scratch = block_ptr(op.forward_scratch_block);
    if (op.fused_into_producer) continue;  // its producer's kernel already applied it
    if (profiling_) {
      // On a device backend the kernels run asynchronously: a layer's time is until they end.
      const auto t0 = clock::now();
      op.layer->forward(op.ctx);
      backend_.stream().synchronize();
      profile_[i].forward_s += std::chrono::duration<double>(clock::now() - t0).count();
    } else {
      op.layer->forward(op.ctx);
    }
  }
  if (prog_->loss_op < 0) return;
  // The L2 terms' sums of squares of the weights this pass ran with, beside the loss.
  auto* out = static_cast<double*>(step_values_.data()) + kLossValues;
  for (size_t s = 0; s < prog_->params.slots().size(); ++s) {
    const auto& slot = prog_->params.slots()[s];
    if (slot.spec.l2 > 0) vec_->sum_squares_into(prog_->params.value(s).data(), slot.count, out++);
  }
}

double Executor::loss() {
  if (prog_->loss_op < 0 || loss_read_) return loss_;
  require_arena();
  // Read in place in host memory; on a device one copy into a vector kept for the next steps
  // (sized once: a training step allocates nothing, not even a TensorView's shape).
  const auto* values = static_cast<const double*>(step_values_.data());
  if (!backend_.memory().is_host()) {
    step_values_read_.resize(step_value_count_);
    backend_.memory().copy_to_host(step_values_read_.data(), values, step_values_.bytes());
    values = step_values_read_.data();
  }
  values_read_ = values;
  loss_read_ = true;  // a loss_from that throws is not asked again for the same values
  data_loss_ = prog_->ops[static_cast<size_t>(prog_->loss_op)]->layer->loss_from(values);
  double penalty = 0;
  const double* sum_squares = values + kLossValues;
  for (const auto& slot : prog_->params.slots()) {
    if (slot.spec.l2 <= 0) continue;
    double part = slot.spec.l2 * *sum_squares++;
    if (slot.spec.shard) slot.spec.shard->sum_over_group(&part, 1);  // the whole tensor's
    penalty += part;
  }
  loss_ = data_loss_ + penalty;
  return loss_;
}

void Executor::flag_nonfinite_loss(void* flag) {
  if (prog_->loss_op < 0) return;
  const auto* values = static_cast<const double*>(step_values_.data());
  vec_->flag_nonfinite(values, 1, flag);  // the loss, not what its pass found
  // The L2 terms: not the reserved values after them (the last step's, for another reader).
  const size_t l2_terms = step_value_count_ - reserved_step_values_ - kLossValues;
  if (l2_terms > 0) vec_->flag_nonfinite(values + kLossValues, l2_terms, flag);
}

void Executor::backward() {
  if (!opts_.training) throw_usage("backward() on an executor compiled for inference");
  require_arena();
  using clock = std::chrono::steady_clock;
  auto val = [&](int v) -> Value& { return *prog_->values[static_cast<size_t>(v)]; };
  char* base = static_cast<char*>(arena_.data());
  for (size_t k = prog_->ops.size(); k-- > 0;) {
    Op& op = *prog_->ops[k];
    if (!op.run_backward || op.backward_in_producer) continue;
    const auto t0 = profiling_ ? clock::now() : clock::time_point{};
    if (op.channel_sum)  // a producer's bias gradient (compile/route_bias_grad.cpp)
      op.channel_sum->run(op.ctx.diff_out[0],
                          prog_->params.grad(static_cast<size_t>(op.channel_sum_slot)).data());
    op.ctx.scratch = block_ptr(op.backward_scratch_block);
    op.layer->backward(op.ctx);
    if (op.param_grad_scale != 1) scale_param_grads(op);
    for (const auto& a : op.accum) {
      void* g = base + prog_->plan.blocks[static_cast<size_t>(val(a.value).grad_storage)].offset;
      const void* t = base + prog_->plan.blocks[static_cast<size_t>(a.temp_block)].offset;
      const MemFormat& f = val(a.value).fmt;
      vec_for(f.dtype).add(g, t, g, f.bytes / dtype_size(f.dtype));
    }
    if (profiling_) {
      backend_.stream().synchronize();
      profile_[k].backward_s += std::chrono::duration<double>(clock::now() - t0).count();
    }
    // This op's parameter gradients are final now (one op owns each parameter): add the L2
    // term and hand them on, so a gradient bucket can start communicating while backward goes on.
    // Last slot first (bias before weight): all of an op's gradients are done at once, and this
    // order walks the flat buffer downwards, so gradient buckets are contiguous slices.
    for (auto it = op.param_slots.rbegin(); it != op.param_slots.rend(); ++it) finish_gradient(*it);
  }
  // Parameters of ops that run no backward (none in the models so far) keep the old rule.
  for (size_t s = 0; s < prog_->params.slots().size(); ++s)
    if (!prog_->finished_in_backward[s]) finish_gradient(static_cast<int>(s));
}

void Executor::scale_param_grads(const compile::Op& op) {
  for (int s : op.param_slots) {
    const ParamSlot& slot = prog_->params.slots()[static_cast<size_t>(s)];
    if (!slot.spec.trainable) continue;
    void* g = prog_->params.grad(static_cast<size_t>(s)).data();
    vec_->scale(op.param_grad_scale, g, g, slot.count);
  }
}

void Executor::finish_gradient(int s) {
  const auto& slot = prog_->params.slots()[static_cast<size_t>(s)];
  if (!slot.spec.trainable) return;
  if (slot.spec.l2 > 0)  // d(l2 w^2)/dw, scaled as the loss's gradient is
    vec_->axpy(2.0 * slot.spec.l2 * loss_scale_, prog_->params.value(static_cast<size_t>(s)).data(),
               prog_->params.grad(static_cast<size_t>(s)).data(), slot.count);
  if (gradient_ready_) gradient_ready_(s);
}

std::vector<int> Executor::gradient_ready_order() const {
  std::vector<int> order;
  for (size_t k = prog_->ops.size(); k-- > 0;)
    if (prog_->ops[k]->run_backward)
      for (auto it = prog_->ops[k]->param_slots.rbegin(); it != prog_->ops[k]->param_slots.rend();
           ++it)
        if (prog_->params.slots()[static_cast<size_t>(*it)].spec.trainable) order.push_back(*it);
  for (size_t s = 0; s < prog_->params.slots().size(); ++s)
    if (!prog_->finished_in_backward[s] && prog_->params.slots()[s].spec.trainable)
      order.push_back(static_cast<int>(s));
  return order;
}

double Executor::forward_flops() const {
  double f = 0;
  for (const auto& op : prog_->ops) f += op->flops.forward;
  return f;
}

double Executor::training_flops() const {
  double f = 0;
  for (const auto& op : prog_->ops) {
    f += op->flops.forward;
    if (op->run_backward) {
      bool data = false;
      for (bool b : op->need_input_grad) data |= b;
      f += op->flops.backward_weights + (data ? op->flops.backward_data : 0.0);
    }
  }
  return f;
}

void Executor::reset_profile() {
  for (auto& p : profile_) p.forward_s = p.backward_s = 0;
}

std::vector<OpFacts> Executor::op_facts() const {
  std::vector<OpFacts> facts;
  for (const auto& op : prog_->ops) {
    OpFacts f;
    f.name = op->name;
    f.kind = op->layer->kind();
    const Value& out = *prog_->values[static_cast<size_t>(op->out.at(0))];
    f.out = out.shape;
    if (!op->in.empty()) f.in = prog_->values[static_cast<size_t>(op->in[0])]->shape;
    f.flops = op->flops;
    f.runs_backward = op->run_backward;
    bool data = false;
    for (bool b : op->need_input_grad) data |= b;
    if (!data) f.flops.backward_data = 0;
    if (!op->run_backward) f.flops.backward_data = f.flops.backward_weights = 0;
    for (int s : op->param_slots) {
      const ParamSlot& slot = prog_->params.slots()[static_cast<size_t>(s)];
      if (slot.spec.trainable) f.trainable_bytes += slot.count * dtype_size(opts_.dtype);
    }
    if (!op->in.empty()) f.windows = op->layer->window_axes(f.in, f.out);
    facts.push_back(std::move(f));
  }
  return facts;
}

std::string Executor::summary() const {
  std::ostringstream os;
  os << std::left << std::setw(24) << "layer" << std::setw(16) << "kind" << std::setw(26)
     << "output" << std::setw(22) << "format" << std::right << std::setw(12) << "params"
     << "  notes\n";
  // The params column and total count trained parameters (what a model's size means); batch
  // norm's running statistics are counted apart as state.
  int64_t total = 0, state = 0;
  for (const auto& op : prog_->ops) {
    int64_t np = 0;
    for (int s : op->param_slots) {
      const ParamSlot& slot = prog_->params.slots()[static_cast<size_t>(s)];
      (slot.spec.trainable ? np : state) += static_cast<int64_t>(slot.count);
    }
    total += np;
    const Value& out = *prog_->values[static_cast<size_t>(op->out.at(0))];
    std::string fmt = out.fmt.layout == Layout::blocked && out.fmt.opaque
                          ? out.fmt.opaque->name()
                          : layout_name(out.fmt.layout);
    if (is_half(out.fmt.dtype)) fmt = dtype_name(out.fmt.dtype) + " " + fmt;  // mixed precision
    std::string notes = op->layer->describe();
    if (op->fused_into_producer) notes += notes.empty() ? "(fused)" : " (fused)";
    if (op->backward_in_producer) notes += ", backward too";
    if (op->inplace) notes += notes.empty() ? "in place" : ", in place";
    if (op->channel_sum)  // compile/route_bias_grad.cpp
      notes += (notes.empty() ? "" : ", ") + std::string("sums the gradient of ") +
               prog_->params.slots()[static_cast<size_t>(op->channel_sum_slot)].name;
    os << std::left << std::setw(24) << op->name.substr(0, 23) << std::setw(16) << op->layer->kind()
       << std::setw(26) << out.shape.str() << std::setw(22) << fmt << std::right << std::setw(12)
       << np << "  " << notes << "\n";
  }
  os << "parameters: " << total;
  if (state > 0) os << " and " << state << " values of non-trained state";
  os << " (" << human_bytes(static_cast<double>(prog_->params.bytes())) << ")\n";
  os << "activation arena: " << human_bytes(static_cast<double>(prog_->plan.arena_bytes))
     << " planned (" << human_bytes(static_cast<double>(prog_->plan.naive_bytes))
     << " without reuse), including kernel scratch (largest request "
     << human_bytes(static_cast<double>(prog_->plan.scratch_bytes)) << ")"
     << "\n";
  return os.str();
}

}  // namespace crest
