#include "crest/engine/pipeline_stage.hpp"

#include <cstring>
#include <string>

#include "crest/core/error.hpp"
#include "gradient_accumulation.hpp"

namespace crest {
namespace {

using Kind = PipelineAction::Kind;

// The value of the stage's graph known as `name` (a received input or a node's output).
ValueId value_named(const Graph& g, const std::string& name) {
  for (ValueId v = 0; v < g.value_count(); ++v)
    if (g.value_name(v) == name) return v;
  throw_usage("pipeline stage: no value named '" + name + "'");
}

// The message that tells the stage after which sent values are blocks (before its compile).
constexpr int kSplitFlagsTag = 0x5b11f;
constexpr double kCompileWaitS = 600;

bool splits_spatially(const CompileOptions& o) { return o.spatial && o.spatial->group_size() > 1; }

}  // namespace

// Under a spatial split, a value crosses a cut as the sender holds it: as this rank's block
// (to the same place of the next stage's group, which holds the same block) or whole. The stage
// before says which, value by value, so a stage compiles only once the one before it has.
std::vector<std::string> PipelineStage::received_whole_values() const {
  if (opts_.previous_rank < 0) return {};
  const Communicator::Message flags = comm_.receive(
      opts_.previous_rank, kSplitFlagsTag, kCompileWaitS,
      "pipeline stage " + std::to_string(opts_.stage) + ": which received values are blocks");
  CREST_CHECK(flags.bytes.size() == graph_.received.size(),
              "pipeline stage: the stage before sends another number of values");
  std::vector<std::string> whole;
  for (size_t i = 0; i < flags.bytes.size(); ++i)
    if (flags.bytes[i] == std::byte{0}) whole.push_back(graph_.received[i]);
  return whole;
}

void PipelineStage::send_split_flags() {
  if (opts_.next_rank < 0) return;
  std::vector<std::byte> flags;
  for (ValueId v : sent_values_)
    flags.push_back(executor().output_is_block(v) ? std::byte{1} : std::byte{0});
  comm_.send(opts_.next_rank, kSplitFlagsTag, flags);
}

// A message on its way: its own copy of the bytes, so the executor that made them may run on.
struct PipelineStage::InFlight {
  std::vector<std::byte> bytes;
  std::unique_ptr<PendingCollective> pending;
};

PipelineStage::PipelineStage(const PipelineStageGraph& graph, Backend& backend,
                             CompileOptions compile, Communicator& comm, PipelineStageOptions opts)
    : graph_(graph), comm_(comm), opts_(opts), memory_(backend.memory()) {
  if (!compile.training) throw_usage("a pipeline stage trains: CompileOptions::training is false");
  compile.grad_inputs = graph.received;
  compile.first_random_stream = graph.first_node;
  const bool split = splits_spatially(compile);
  if (split) {  // sent values stay blocks where the stage holds blocks
    compile.split_outputs = true;
    compile.whole_inputs = received_whole_values();
  }
  const PipelinePlan plan = make_pipeline_plan(opts.schedule, opts.stages, opts.micro_batches);
  actions_ = plan.at(static_cast<size_t>(opts.stage));
  int sets = 1;
  if (!opts.recompute)
    sets = std::max(1, check_pipeline_plan(plan, opts.micro_batches)
                           .peak_activations.at(static_cast<size_t>(opts.stage)));
  // Each set's executor checks the stage's whole memory: every set's activations, the
  // micro-batches' gradient sum and recomputation's copy of the parameters (made below).
  compile.beside.activation_sets = sets;
  if (opts.micro_batches > 1) ++compile.beside.trainable_copies;
  if (opts.recompute) ++compile.beside.value_copies;
  // One set of parameters: every activation set's executor uses the first one's.
  for (int e = 0; e < sets; ++e) {
    slots_.push_back(std::make_unique<Executor>(graph.graph, backend, compile));
    slots_.back()->set_gradient_ready([this, e](int slot) { on_gradient_ready(e, slot); });
    compile.shared_params = &slots_.front()->params();
  }
  set_loss_scale(1);
  slot_micro_batch_.assign(slots_.size(), -1);
  micro_batch_slot_.assign(static_cast<size_t>(opts.micro_batches), -1);
  if (opts.recompute) kept_inputs_.resize(static_cast<size_t>(opts.micro_batches));
  const ParamStore& params = executor().params();
  if (opts.micro_batches > 1) grad_sum_ = Buffer(params.trainable_bytes(), 256, params.memory());
  if (opts.recompute) recompute_state_ = Buffer(params.bytes(), 256, params.memory());
  for (const std::string& name : graph.sent) sent_values_.push_back(value_named(graph.graph, name));
  if (split) send_split_flags();
}

PipelineStage::~PipelineStage() = default;

StageStepResult PipelineStage::run(const Feed& feed) {
  start_batch();
  StageStepResult r;
  for (const PipelineAction& a : actions_) run_action(a, feed, r);
  wait_for_sends();
  finish_batch();
  r.data_loss /= opts_.micro_batches;
  r.penalty /= opts_.micro_batches;
  return r;
}

void PipelineStage::start_batch() {
  first_step_ = executor().training_steps();
  backwards_done_ = 0;
  slot_micro_batch_.assign(slots_.size(), -1);
  micro_batch_slot_.assign(micro_batch_slot_.size(), -1);
}

void PipelineStage::run_action(const PipelineAction& a, const Feed& feed, StageStepResult& r) {
  switch (a.kind) {
    case Kind::receive_activation:
      receive_activation(a.micro_batch);
      break;
    case Kind::forward:
      forward(a.micro_batch, feed, r);
      break;
    case Kind::send_activation:
      send_activation(a.micro_batch);
      break;
    case Kind::receive_gradient:
      receive_gradient(a.micro_batch);
      break;
    case Kind::backward:
      backward(a.micro_batch, r);
      break;
    case Kind::send_gradient:
      send_gradient(a.micro_batch);
      break;
  }
}

// The stage's executor ends the batch with its step counter past the batch (the activation sets
// share its parameters: the statistics are the last micro-batch's, the gradient the
// micro-batches' mean).
void PipelineStage::finish_batch() {
  executor().set_training_steps(first_step_ + static_cast<uint64_t>(opts_.micro_batches));
}

// The micro-batches' gradients (each of its loss over M: set_loss_scale) summed slot by slot as
// backward finishes each: after the last, the parameters' gradients are the batch's mean. The
// activation sets share the parameters, so `set` only says whose backward it was.
void PipelineStage::on_gradient_ready(int set, int slot) {
  const ParamStore& p = slots_[static_cast<size_t>(set)]->params();
  const auto s = static_cast<size_t>(slot);
  void* grad = p.grad(s).data();
  auto* sum = static_cast<std::byte*>(grad_sum_.data());  // null for one micro-batch
  accumulate_gradient_slot(p.ops(), backwards_done_, opts_.micro_batches, grad,
                           sum ? sum + p.slots()[s].offset : nullptr, grad, p.slots()[s].count,
                           1.0);
}

double PipelineStage::evaluate(const Feed& feed, const Read& read) {
  Executor& ex = executor();
  double loss = 0;
  slot_micro_batch_.assign(slots_.size(), -1);  // whatever slot 0 held is overwritten
  micro_batch_slot_.assign(micro_batch_slot_.size(), -1);
  for (int m = 0; m < opts_.micro_batches; ++m) {
    if (opts_.stage > 0) receive_activation(m);
    if (feed) feed(m, ex);
    ex.forward(false);
    loss += ex.last_data_loss();
    if (opts_.stage + 1 < opts_.stages) send_activation(m);
    if (read && opts_.stage + 1 == opts_.stages) read(m, ex);
    micro_batch_slot_[static_cast<size_t>(m)] = -1;
    slot_micro_batch_[0] = -1;
  }
  wait_for_sends();
  return loss / opts_.micro_batches;
}

int PipelineStage::take_slot(int m) {
  int e = 0;
  if (!opts_.recompute)
    while (slot_micro_batch_[static_cast<size_t>(e)] >= 0)
      if (++e == static_cast<int>(slots_.size()))
        throw_runtime("pipeline stage " + std::to_string(opts_.stage) +
                      ": more micro-batches in flight than the schedule allows");
  // Recompute: one set; whatever it held is recomputed when its backward comes.
  if (opts_.recompute && slot_micro_batch_[0] >= 0)
    micro_batch_slot_[static_cast<size_t>(slot_micro_batch_[0])] = -1;
  slot_micro_batch_[static_cast<size_t>(e)] = m;
  micro_batch_slot_[static_cast<size_t>(m)] = e;
  return e;
}

void PipelineStage::set_batch_stat_reducer(BatchStatReducer* reducer) {
  for (const auto& e : slots_) e->set_batch_stat_reducer(reducer);
}

// Each micro-batch's loss enters the batch's divided by M: the gradients sum to the mean with no
// pass of their own (exact where M is a power of two; otherwise within a rounding of the mean).
void PipelineStage::set_loss_scale(double scale) {
  for (const auto& e : slots_) e->set_loss_scale(scale / opts_.micro_batches);
}

Executor& PipelineStage::slot_of(int m) {
  int e = micro_batch_slot_[static_cast<size_t>(m)];
  if (e < 0) e = opts_.recompute ? 0 : take_slot(m);
  return *slots_[static_cast<size_t>(e)];
}

int PipelineStage::tag(int m, bool gradient, size_t value, size_t values) const {
  return static_cast<int>((static_cast<size_t>(m) * 2 + (gradient ? 1 : 0)) * values + value);
}

// Messages travel from host memory: on a device backend a received message lands in a host
// buffer kept for every message (no allocation per micro-batch) and then goes to the device (a
// sent one is copied off it, in post).
void PipelineStage::receive_into(const TensorView& t, int source, int tag,
                                 const std::string& what) {
  if (memory_.is_host()) {
    comm_.exchange({}, {{source, tag, t.data(), t.bytes()}}, what);
    return;
  }
  received_.resize(t.bytes());
  comm_.exchange({}, {{source, tag, received_.data(), t.bytes()}}, what);
  memory_.copy_to_device(t.data(), received_.data(), t.bytes());
}

void PipelineStage::receive_activation(int m) {
  Executor& ex = *slots_[static_cast<size_t>(take_slot(m))];
  const auto& names = graph_.received;
  for (size_t i = 0; i < names.size(); ++i)
    receive_into(ex.input(names[i]), opts_.previous_rank, tag(m, false, i, names.size()),
                 "pipeline stage " + std::to_string(opts_.stage) + ": receiving '" + names[i] +
                     "' of micro-batch " + std::to_string(m) + " from rank " +
                     std::to_string(opts_.previous_rank));
}

void PipelineStage::forward(int m, const Feed& feed, StageStepResult& r) {
  if (micro_batch_slot_[static_cast<size_t>(m)] < 0) take_slot(m);
  const int e = micro_batch_slot_[static_cast<size_t>(m)];
  Executor& ex = *slots_[static_cast<size_t>(e)];
  if (feed) feed(m, ex);
  if (opts_.recompute) keep_inputs(m);
  ex.set_training_steps(first_step_ + static_cast<uint64_t>(m));
  const double start = steady_seconds();
  ex.run_forward(true);  // its loss is read after its backward
  r.compute_s += steady_seconds() - start;
}

void PipelineStage::send_activation(int m) {
  Executor& ex = slot_of(m);
  const auto& names = graph_.sent;
  for (size_t i = 0; i < names.size(); ++i)
    post(ex.output(sent_values_[i]), opts_.next_rank, tag(m, false, i, names.size()),
         "'" + names[i] + "' of micro-batch " + std::to_string(m));
}

// Sends a copy of `t`, so the executor that made it may run on while the message waits.
void PipelineStage::post(const TensorView& t, int dest, int tag, const std::string& what) {
  auto msg = std::make_unique<InFlight>();
  msg->bytes = spare_bytes(t.bytes());
  memory_.copy_to_host(msg->bytes.data(), t.data(), t.bytes());
  msg->pending = comm_.start_send({dest, tag, msg->bytes.data(), msg->bytes.size()},
                                  "pipeline stage " + std::to_string(opts_.stage) + ": sending " +
                                      what + " to rank " + std::to_string(dest));
  sends_.push_back(std::move(msg));
}

void PipelineStage::receive_gradient(int m) {
  Executor& ex = slot_of(m);
  const auto& names = graph_.sent;
  for (size_t i = 0; i < names.size(); ++i)
    receive_into(ex.input(upstream_gradient_input(names[i])), opts_.next_rank,
                 tag(m, true, i, names.size()),
                 "pipeline stage " + std::to_string(opts_.stage) + ": receiving the gradient of '" +
                     names[i] + "' of micro-batch " + std::to_string(m) + " from rank " +
                     std::to_string(opts_.next_rank));
}

void PipelineStage::backward(int m, StageStepResult& r) {
  const double start = steady_seconds();
  if (opts_.recompute && slot_micro_batch_[0] != m) recompute(m);
  Executor& ex = slot_of(m);
  ex.backward();  // its gradients join the batch's sum slot by slot (on_gradient_ready)
  ++backwards_done_;
  r.compute_s += steady_seconds() - start;
  // Read once the backward is queued (on a device nothing between the passes waits for it).
  const double loss = ex.loss();
  r.data_loss += ex.last_data_loss();
  r.penalty += loss - ex.last_data_loss();
  if (opts_.stage == 0) {  // nothing to send: its activations are free
    slot_micro_batch_[static_cast<size_t>(micro_batch_slot_[static_cast<size_t>(m)])] = -1;
    micro_batch_slot_[static_cast<size_t>(m)] = -1;
  }
}

void PipelineStage::send_gradient(int m) {
  const int e = micro_batch_slot_[static_cast<size_t>(m)];
  Executor& ex = *slots_[static_cast<size_t>(e)];
  const auto& names = graph_.received;
  for (size_t i = 0; i < names.size(); ++i)
    post(ex.input_grad(names[i]), opts_.previous_rank, tag(m, true, i, names.size()),
         "the gradient of '" + names[i] + "' of micro-batch " + std::to_string(m));
  slot_micro_batch_[static_cast<size_t>(e)] = -1;
  micro_batch_slot_[static_cast<size_t>(m)] = -1;
}

// The inputs a recomputed forward needs: the whole graph's this stage reads, and the received.
void PipelineStage::keep_inputs(int m) {
  Executor& ex = *slots_[0];
  auto& kept = kept_inputs_[static_cast<size_t>(m)];
  kept.clear();
  for (const auto* names : {&graph_.data_inputs, &graph_.received})
    for (const std::string& name : *names) {
      const TensorView in = ex.input(name);
      const size_t at = kept.size();
      kept.resize(at + in.bytes());
      memory_.copy_to_host(kept.data() + at, in.data(), in.bytes());
    }
}

void PipelineStage::recompute(int m) {
  Executor& ex = *slots_[0];
  const auto& kept = kept_inputs_[static_cast<size_t>(m)];
  size_t at = 0;
  for (const auto* names : {&graph_.data_inputs, &graph_.received})
    for (const std::string& name : *names) {
      const TensorView in = ex.input(name);
      memory_.copy_to_device(in.data(), kept.data() + at, in.bytes());
      at += in.bytes();
    }
  // The running statistics are the batch's so far: this forward must not advance them again.
  const ParamStore& p = ex.params();
  p.ops().copy(p.values(), recompute_state_.data(), p.bytes() / dtype_size(p.dtype()));
  ex.set_training_steps(first_step_ + static_cast<uint64_t>(m));
  ex.run_forward(true);
  p.ops().copy(recompute_state_.data(), p.values(), p.bytes() / dtype_size(p.dtype()));
  slot_micro_batch_[0] = m;
  micro_batch_slot_[static_cast<size_t>(m)] = 0;
}

// A buffer of `bytes` for a message's copy: one a sent message left (a stage sends the same
// values every batch), so no batch allocates and first touches its messages' memory again.
std::vector<std::byte> PipelineStage::spare_bytes(size_t bytes) {
  for (auto it = spare_.rbegin(); it != spare_.rend(); ++it)
    if (it->size() == bytes) {
      std::vector<std::byte> b = std::move(*it);
      spare_.erase(std::next(it).base());
      return b;
    }
  return std::vector<std::byte>(bytes);
}

void PipelineStage::wait_for_sends() {
  for (auto& s : sends_) {
    s->pending->wait();
    spare_.push_back(std::move(s->bytes));
  }
  sends_.clear();
}

// As planned, so a plan-only stage (crest train --dry-run) reports what it would hold.
size_t PipelineStage::activation_bytes() const {
  size_t bytes = 0;
  for (const auto& e : slots_) bytes += e->plan().arena_bytes;
  if (kept_inputs_.empty()) return bytes;
  size_t inputs = 0;  // one micro-batch's, as keep_inputs keeps them
  for (const auto* names : {&graph_.data_inputs, &graph_.received})
    for (const std::string& name : *names) inputs += slots_[0]->input(name).bytes();
  return bytes + inputs * kept_inputs_.size();
}

}  // namespace crest
