// One rank's stage of a pipeline (dist.pipeline; docs/distributed.md "Pipeline stages"): it runs
// its part of the network (crest/graph/pipeline_cut.hpp) over a batch's M micro-batches in the
// order a schedule gives (crest/dist/pipeline_schedule.hpp: GPipe or 1F1B), receiving each
// micro-batch's activations from the stage before and its output gradients from the stage after,
// and sending its own on, point to point with one tag per value, micro-batch and direction.
//
// After run(), the stage's executor holds the gradient of the batch's loss with the loss of each
// micro-batch divided by M — the mean of the micro-batches' gradients, what one process gets
// accumulating them — ready for the data-parallel allreduce and one optimizer update per batch.
//
// The rules that make the result independent of K and of the schedule:
// - batch norm normalises each micro-batch by its own statistics (as gradient accumulation over
//   micro-batches does), and its running statistics are updated micro-batch by micro-batch in
//   order 0..M-1;
// - dropout draws micro-batch m's masks from the training step counter (the batch's first
//   step + m) and the node's position in the whole graph, so every K draws the same masks;
// - recompute: the stage keeps only each micro-batch's inputs and runs its forward again just
//   before that micro-batch's backward (the step counter set back, the running statistics put
//   back after it), so one set of activations lives at a time. Without it the stage keeps one set
//   per micro-batch in flight: M under GPipe, at most K - stage under 1F1B.
// - the activation sets share one set of parameters, gradients and statistics (one executor per
//   set, CompileOptions::shared_params): each micro-batch's gradients join the batch's sum slot
//   by slot as its backward finishes them, before the next backward overwrites them.
//
// Under a spatial split (CompileOptions::spatial) each stage's ranks form one spatial group, and
// a value crosses a cut as its sender holds it: this rank's block, to the rank of the same place
// in the next stage's group (which holds the same block), or whole where the stage before
// gathered it. The stages compile in order, each telling the next which values are blocks.
//
// Messages travel from host memory: on a device backend each is copied off the device before it
// is sent and onto it once received (the communicator's point-to-point messages are host
// buffers; device-to-device transports are for the NCCL communicator).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crest/dist/communicator.hpp"
#include "crest/dist/pipeline_schedule.hpp"
#include "crest/graph/executor.hpp"
#include "crest/graph/pipeline_cut.hpp"

namespace crest {

struct PipelineStageOptions {
  int stage = 0, stages = 1, micro_batches = 1;
  PipelineScheduleKind schedule = PipelineScheduleKind::gpipe;
  bool recompute = false;
  int previous_rank = -1, next_rank = -1;  // in the communicator; -1 at the ends
};

struct StageStepResult {
  double data_loss = 0;  // the mean over micro-batches of the loss (the last stage; else 0)
  double penalty = 0;    // the L2 penalties of this stage's parameters
  // Seconds this stage computed (forwards, recomputed forwards, backwards and the gradient sum):
  // the rest of the batch it waited for messages — the pipeline's bubble and its imbalance.
  double compute_s = 0;
};

class PipelineStage {
 public:
  // `compile.batch` is the micro-batch's size; `compile.training` must be true.
  PipelineStage(const PipelineStageGraph& graph, Backend& backend, CompileOptions compile,
                Communicator& comm, PipelineStageOptions opts);
  ~PipelineStage();
  PipelineStage(const PipelineStage&) = delete;
  PipelineStage& operator=(const PipelineStage&) = delete;

  // The stage's parameters (and their gradients after run()); write weights through it.
  Executor& executor() { return *slots_[0]; }
  // Synchronised batch norm: every activation set's batch norms sum their statistics through
  // `reducer` (Executor::set_batch_stat_reducer); null for local batch norm.
  void set_batch_stat_reducer(BatchStatReducer* reducer);
  // Dynamic loss scaling: every activation set's backward seeds the loss's gradient with
  // `scale` / M (Executor::set_loss_scale; only the last stage has the loss, every stage its L2
  // terms). 1 until set: the micro-batches' gradients sum to the batch's mean.
  void set_loss_scale(double scale);
  const PipelineStageGraph& graph() const { return graph_; }
  int micro_batches() const { return opts_.micro_batches; }

  // Writes micro-batch m's whole-graph inputs this stage reads (graph().data_inputs) into `ex`.
  using Feed = std::function<void(int micro_batch, Executor& ex)>;
  // One batch, every action of this stage's schedule in order. Every stage of the pipeline calls
  // it for the same batch.
  StageStepResult run(const Feed& feed);

  // Evaluation (validation, prediction): micro-batch by micro-batch, the forward only, in training
  // mode false (dropout off, batch norm's running statistics), each stage sending its values on.
  // On the last stage `read` sees the executor after each micro-batch's forward (its marked
  // outputs: the prediction). Returns the mean over micro-batches of the loss (the last stage's;
  // 0 elsewhere). Changes no parameter, statistic or step counter.
  using Read = std::function<void(int micro_batch, const Executor& ex)>;
  double evaluate(const Feed& feed, const Read& read = {});

  int activation_sets() const { return static_cast<int>(slots_.size()); }
  size_t activation_bytes() const;  // the arenas of every set, plus the kept inputs
  // The micro-batches' gradient sum (M > 1; none for one micro-batch).

 private:
  struct InFlight;
  std::vector<std::string> received_whole_values() const;
  void send_split_flags();
  void start_batch();
  void run_action(const PipelineAction& a, const Feed& feed, StageStepResult& r);
  void finish_batch();
  void receive_activation(int m);
  void forward(int m, const Feed& feed, StageStepResult& r);
  void send_activation(int m);
  void receive_gradient(int m);
  void backward(int m, StageStepResult& r);
  void send_gradient(int m);
  void on_gradient_ready(int set, int slot);
  void post(const TensorView& t, int dest, int tag, const std::string& what);
  void receive_into(const TensorView& t, int source, int tag, const std::string& what);
  Executor& slot_of(int m);
  int take_slot(int m);
  void recompute(int m);
  void keep_inputs(int m);
  void wait_for_sends();
  std::vector<std::byte> spare_bytes(size_t bytes);
  int tag(int m, bool gradient, size_t value, size_t values) const;

  PipelineStageGraph graph_;
  Communicator& comm_;
  PipelineStageOptions opts_;
  MemoryResource& memory_;  // the backend's: activations and gradients live there
  std::vector<PipelineAction> actions_;
  std::vector<std::unique_ptr<Executor>> slots_;
  std::vector<int> slot_micro_batch_;  // per slot: the micro-batch whose activations it holds
  std::vector<int> micro_batch_slot_;  // per micro-batch: its slot, -1 before and after
  std::vector<std::vector<std::byte>> kept_inputs_;  // recompute: per micro-batch
  std::vector<std::unique_ptr<InFlight>> sends_;
  std::vector<std::vector<std::byte>> spare_;  // the sent messages' buffers, for the next batch
  std::vector<std::byte> received_;            // a device backend's received message, on the host
  Buffer grad_sum_;
  Buffer recompute_state_;            // recompute: the parameters and statistics, kept aside
  std::vector<ValueId> sent_values_;  // graph_.sent's values in the stage's graph
  uint64_t first_step_ = 0;
  int backwards_done_ = 0;
};

}  // namespace crest
