#include "crest/engine/train_step.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/dist/timeline.hpp"
#include "crest/graph/param_shard.hpp"
#include "gradient_accumulation.hpp"
#include "step_graph.hpp"

namespace crest {

namespace {

// overflow_next_gradient(): +infinity in the first element of `slot`'s gradient (float32).
void write_gradient_infinity(const ParamStore& params, int slot) {
  CREST_CHECK(params.dtype() == DType::f32, "a test gradient overflow needs float32");
  HostStaging host(params.memory(), params.grad(static_cast<size_t>(slot)).data(), sizeof(float));
  host.as<float>()[0] = std::numeric_limits<float>::infinity();
  host.commit();
}

}  // namespace

TrainStep::TrainStep(Executor& ex, Optimizer& optimizer, GradientSync* sync, LossScaler* scaler)
    : ex_(ex),
      optimizer_(optimizer),
      sync_(sync),
      scaler_(scaler),
      accumulation_(optimizer.accumulation()) {
  if (Buffer* lagged = optimizer_.lagged_gradient())
    lag_ = std::make_unique<LaggedGradients>(ex_.params(), *lagged, sync_);
  update_facts_ = ex_.reserve_step_values(kUpdateFacts);
  ex_.set_gradient_ready([this](int slot) { on_gradient_ready(slot); });
}

TrainStep::~TrainStep() = default;

void TrainStep::record_passes() {
  const std::string asked = "crest.cuda_graphs records a step's passes as one graph";
  if (!ex_.backend().stream().captures())
    throw_usage(asked + ": crest.backend " + ex_.backend().name() +
                " runs its work as it is called and records none (use crest.backend: cuda)");
  if (exchanges())
    if (const std::string why = sync_->why_not_recordable(); !why.empty())
      throw_usage(asked + " with its gradient exchange, which needs " + why);
  if (accumulation_ > 1)
    throw_usage(asked + ", which needs train.gradient_accumulation_frequency 1 (got " +
                std::to_string(accumulation_) + ")");
  if (lag_) throw_usage(asked + ", which needs train.gradient_lag 0");
  pass_graph_ = std::make_unique<StepGraph>(ex_.backend().stream());
  update_graph_ = std::make_unique<StepGraph>(ex_.backend().stream());
}

int64_t TrainStep::recorded_steps() const { return pass_graph_ ? pass_graph_->recorded() : 0; }

int64_t TrainStep::recorded_updates() const {
  return update_graph_ ? update_graph_->recorded() : 0;
}

int64_t TrainStep::replayed_steps() const { return pass_graph_ ? pass_graph_->replayed() : 0; }

int64_t TrainStep::replayed_updates() const {
  return update_graph_ ? update_graph_->replayed() : 0;
}

bool TrainStep::records_now() const {
  return pass_graph_ && local_steps_ == 1 && !overflow_next_ && !ex_.profiling();
}

// Its kernels read their rate and step count from the backend's memory, written before them
// (Optimizer::begin_step): the same kernels every step, so a recording is launched again.
void TrainStep::update(double lr) {
  if (!records_now() || !optimizer_.replays_update()) return optimizer_.step(lr);
  optimizer_.begin_step(lr);
  update_graph_->next_key();  // nothing of the host's
  update_graph_->run([&] { optimizer_.queue_update(); });
}

// Everything between the forward's first kernel and the backward's last queues work without
// waiting for it (the update's facts are read after), so it may be recorded; its host side (the
// executor's begin_forward, the window's flags taken) runs every step, outside the recording.
// With several ranks the exchange is recorded too: the buckets backward starts, then the rest and
// the stream's join (GradientSync::queue_finish); finish_recorded waits after the launch.
void TrainStep::run_passes(StepResult& r, bool sideband_written, bool failed_here, bool recorded) {
  ex_.begin_forward(true);
  SidebandFlags sideband;
  if (sideband_written) {
    sideband = take_sideband_flags(/*flag_this_loss=*/!failed_here);
    if (scaler_ && sync_) sync_->set_loss_scale(r.loss_scale);
  }
  const SidebandFlags* written = sideband_written ? &sideband : nullptr;
  if (!recorded) return queue_passes(written, &r);
  key_passes(written);
  pass_graph_->run([&] {
    queue_passes(written, nullptr);
    if (exchanges()) sync_->queue_finish();
  });
  r.forward_done = Timeline::now();  // one launch: forward and backward are not told apart
}

// Before backward: the bucket carrying the sideband may start while backward runs.
void TrainStep::queue_passes(const SidebandFlags* sideband, StepResult* forward_done) {
  ex_.queue_forward(true);
  if (forward_done) forward_done->forward_done = Timeline::now();
  if (sideband) write_sideband(*sideband);
  ex_.backward();
}

// The inputs' addresses (two batch buffers alternate), the executor's loss scale (the loss
// layer's and the L2 terms' factor) and the sideband's flags (which fills run).
void TrainStep::key_passes(const SidebandFlags* sideband) {
  std::vector<uint64_t>& key = pass_graph_->next_key();
  for (const void* input : ex_.input_bindings()) key.push_back(reinterpret_cast<uintptr_t>(input));
  key.push_back(std::bit_cast<uint64_t>(ex_.loss_scale()));
  // The buckets' 1/(ranks·S), a kernel argument of the recorded exchange.
  key.push_back(std::bit_cast<uint64_t>(sync_ ? sync_->loss_scale() : 0.0));
  uint64_t flags = 0;  // none written
  if (sideband)
    flags = 1 + 2U * sideband->stop + 4U * sideband->nonfinite_loss + 8U * sideband->failed +
            16U * sideband->flag_this_loss;
  key.push_back(flags);
}

bool TrainStep::next_updates() const { return (micro_batches_ + 1) % accumulation_ == 0; }

bool TrainStep::window_open() const { return micro_batches_ % accumulation_ != 0; }

// Slot by slot as backward finishes it: the first micro-batch of a window starts the sum, the
// middle ones add to it, the last one takes it back, scaled by 1/k (and on one rank by 1/S: the
// loss scale leaves in the same multiply), and goes on to the allreduce.
void TrainStep::on_gradient_ready(int slot) {
  const ParamStore& params = ex_.params();
  if (overflow_next_) {
    write_gradient_infinity(params, slot);
    overflow_next_ = false;
  }
  if (accumulation_ > 1) {
    const ParamSlot& s = params.slots()[static_cast<size_t>(slot)];
    void* grad = params.grad(static_cast<size_t>(slot)).data();
    void* sum = static_cast<char*>(optimizer_.gradient_sum()) + s.offset;
    const double unscale = scaler_ && !exchanges() ? 1.0 / ex_.loss_scale() : 1.0;
    accumulate_gradient_slot(ex_.vec(), phase_, accumulation_, grad, sum, grad, s.count,
                             1.0 / accumulation_ * unscale);
  }
  // Lagged gradients leave after backward, all at once (apply_lagged); local steps send none.
  if (phase_ + 1 == accumulation_ && exchanges() && !lagged(micro_batches_) && local_steps_ == 1)
    sync_->gradient_ready(slot);
}

StepResult TrainStep::run(double lr, bool stop_here, bool failed_here) {
  StepResult r;
  // S changes only where a window ends, so every micro-batch of a window carries the same one.
  if (scaler_) {
    r.loss_scale = scaler_->scale();
    ex_.set_loss_scale(r.loss_scale);
  }
  window_stop_ |= stop_here;
  window_failed_ |= failed_here;
  phase_ = static_cast<int>(micro_batches_ % accumulation_);
  r.updated = phase_ + 1 == accumulation_;
  // Backward runs even after a non-finite loss, so every rank joins every collective.
  const bool sideband_written = r.updated && local_steps_ == 1;
  // Decided once: a pass may clear overflow_next_, which records_now() reads.
  const bool recorded = records_now();
  run_passes(r, sideband_written, failed_here, recorded);
  const bool lagged_window = lagged(micro_batches_);
  // The lag's first window has nothing to apply.
  const bool first_lagged = micro_batches_ / accumulation_ == lag_start_window_;
  ++micro_batches_;
  r.backward_done = Timeline::now();
  if (!sideband_written) {
    // Read once backward is queued: on a device nothing between the passes waits for the loss.
    // (An update's step reads it later, with the update's facts: read_update_facts.)
    r.loss = ex_.loss();
    window_nonfinite_loss_ |= !failed_here && !std::isfinite(r.loss);
  }
  if (!r.updated) {
    r.gradients_done = r.update_done = r.backward_done;
    return r;
  }
  if (local_steps_ > 1) {
    update_locally(r, lr);
    return r;
  }
  if (lagged_window) {
    // The lagged gradient goes aside unscaled (by its own step's S: one rank here, the allreduce
    // elsewhere), so the update a step later needs no scale, whatever the scaler did meanwhile.
    unscale_where_nothing_else_does();
    apply_lagged(r, lr, !first_lagged);
    return r;
  }
  if (sync_) recorded ? sync_->finish_recorded() : sync_->finish();
  r.gradients_done = Timeline::now();
  unscale_where_nothing_else_does();
  decide_update(r, lr);
  r.update_done = Timeline::now();
  return r;
}

// This step's gradients go aside and start their allreduce; the previous step's, averaged, take
// their place in the gradient buffer (sideband included) and make the update (LaggedGradients).
void TrainStep::apply_lagged(StepResult& r, double lr, bool have_previous) {
  // The correction's own gradient is the rank's sample's: a spatial group's shares of it are
  // averaged first, synchronously (a local SGD step's rule).
  if (lag_->corrects_locally() && spatial_group_)
    average_replicated(*spatial_group_, ex_.params(), ex_.params().grads(),
                       ex_.params().trainable_bytes());
  // The allreduce unscales the average; this rank's own gradient, under loss scaling, is its own.
  lag_->swap(have_previous, exchanges() && scaler_ ? 1.0 / ex_.loss_scale() : 1.0);
  r.gradients_done = Timeline::now();
  if (!have_previous && !lag_->corrects_locally()) {  // the first window: nothing to apply yet
    r.loss = ex_.loss();
    r.updated = false;
    r.update_done = r.gradients_done;
    return;
  }
  decide_update(r, lr, lag_->corrects_locally());
  r.update_done = Timeline::now();
}

void TrainStep::correct_lag_locally() {
  CREST_CHECK(lag_ && micro_batches_ == 0, "the lag's correction is set before the first step");
  lag_->correct_locally();
}

void TrainStep::set_local_steps(int steps) {
  CREST_CHECK(steps >= 1 && !local_window_open(), "local SGD windows change between windows");
  if (steps > 1 && optimizer_.lagged_gradient())
    throw_usage("train.local_sgd with train.gradient_lag is not supported");
  local_steps_ = exchanges() ? steps : 1;
}

// A local step: this rank's own gradients, its own non-finite check; the window's last step
// averages the models. Under dynamic loss scaling the gradients are unscaled here, and the ranks
// agree on whether any overflowed (overflow_anywhere).
void TrainStep::update_locally(StepResult& r, double lr) {
  r.gradients_done = Timeline::now();
  const ParamStore& params = ex_.params();
  if (spatial_group_)
    average_replicated(*spatial_group_, params, params.grads(), params.trainable_bytes());
  if (scaler_)
    params.ops().scale(1.0 / ex_.loss_scale(), params.grads(), params.grads(),
                       params.trainable_count_padded());
  const double norm_sq = params.grad_sum_squares();
  const bool skipped = scaler_ && overflow_anywhere(r, norm_sq);
  if (!window_failed_ && !skipped) {  // a failed rank's inputs are stale: the job ends there
    if (std::isfinite(norm_sq) && std::isfinite(r.loss)) {
      optimizer_.offer_gradient_sum_squares(norm_sq);
      optimizer_.step(lr);
    } else {
      window_nonfinite_gradient_ = window_nonfinite_gradient_ || !std::isfinite(norm_sq);
    }
  }
  ++local_since_average_;
  // Every local_steps_ updates: of accumulation_ micro-batches each.
  if (micro_batches_ % (static_cast<int64_t>(local_steps_) * accumulation_) == 0) average_models(r);
  r.update_done = Timeline::now();
}

// Dynamic loss scaling under local SGD: the ranks' own overflows would move each rank's scale its
// own way, and a checkpoint holds one scaler. So each local step the ranks sum two flags (a
// non-finite loss, a non-finite gradient: one small allreduce, where the synchronous step reads
// them from the gradients' sideband) and every scaler decides on the job's facts: an overflow on
// any rank skips the step on every rank, as a synchronous step does.
bool TrainStep::overflow_anywhere(StepResult& r, double norm_sq) {
  double flags[2] = {window_nonfinite_loss_ ? 1.0 : 0.0, std::isfinite(norm_sq) ? 0.0 : 1.0};
  sync_->communicator().allreduce_sum(flags, 2);
  r.overflow = scaler_->skips_overflow(flags[0] == 0, flags[1] == 0);
  return r.overflow;
}

// The mean of every rank's model and optimizer state, and the window's flags summed: what each
// rank saw, the job learns here. A rank that skipped a non-finite update is an optimizer step
// behind: all take the largest count (Adam's and LAMB's bias correction).
void TrainStep::average_models(StepResult& r) {
  average_model_and_state();
  Communicator& comm = sync_->communicator();
  double flags[4] = {window_stop_ ? 1.0 : 0.0, window_nonfinite_loss_ ? 1.0 : 0.0,
                     window_failed_ ? 1.0 : 0.0, window_nonfinite_gradient_ ? 1.0 : 0.0};
  comm.allreduce_sum(flags, 4);
  r.decided = true;
  r.stop_requested = flags[0] > 0;
  r.nonfinite_loss = flags[1] > 0;
  r.rank_failed = flags[2] > 0;
  r.finite = flags[1] == 0 && flags[3] == 0;
  if (!r.finite)
    optimizer_.set_steps_taken(
        static_cast<int64_t>(comm.allreduce_max(static_cast<double>(optimizer_.steps_taken()))));
  window_stop_ = window_nonfinite_loss_ = window_failed_ = window_nonfinite_gradient_ = false;
  local_since_average_ = 0;
}

StepResult TrainStep::end_local_window() {
  StepResult r;
  if (local_window_open()) average_models(r);
  if (lag_ && lag_->corrects_locally()) settle();  // the corrected lag's models, likewise
  return r;
}

void TrainStep::average_model_and_state() {
  Communicator& comm = sync_->communicator();
  const ParamStore& params = ex_.params();
  average_store_layout(comm, params, params.values(), params.bytes());
  for (const auto& state : optimizer_.state())
    if (state.second != optimizer_.lagged_gradient())
      average_store_layout(comm, params, state.second->data(), params.trainable_bytes());
}

void TrainStep::settle() {
  if (!lag_) return;
  lag_->settle();
  if (!lag_->corrects_locally()) return;
  if (lag_->models_diverged()) average_model_and_state();
  lag_->restart_correction();
}

// One rank, no accumulation: no multiply runs over the gradients that 1/S could join.
void TrainStep::unscale_where_nothing_else_does() {
  if (!scaler_ || exchanges() || accumulation_ > 1) return;
  const ParamStore& params = ex_.params();
  params.ops().scale(1.0 / ex_.loss_scale(), params.grads(), params.grads(),
                     params.trainable_count_padded());
}

// The job-wide check needs no collective of its own: after the allreduce every rank holds the
// same averaged gradients, and a sum that met an infinity or NaN on any rank (or overflowed in the
// sum, or in fp16 compression) is itself non-finite, whatever the order of the additions. So one
// local pass over them answers for the whole job: the sum of squares, which a NaN or infinity
// anywhere poisons. It is the pass every update makes for train.on_nonfinite; with a loss scaler
// it is the overflow check as well, made once per optimizer step on the window's summed gradient.
void TrainStep::decide_update(StepResult& r, double lr, bool corrected) {
  double norm_sq = read_update_facts(r);
  if (r.rank_failed) return;  // the run ends: nothing to decide
  // The lag's local correction holds this rank's own fresh gradient, which the check above does
  // not see on the other ranks: where it is not finite, this rank takes the average alone, which
  // every rank checks alike (the next average carries the bad values to all of them).
  if (corrected && !std::isfinite(norm_sq)) {
    lag_->drop_correction();
    norm_sq = ex_.params().grad_sum_squares();
  }
  const bool gradients_finite = std::isfinite(norm_sq);
  // Any non-finite value the scaler does not skip, and any without a scaler, is
  // train.on_nonfinite's (LossScaler::skips_overflow).
  if (scaler_ && scaler_->skips_overflow(!r.nonfinite_loss, gradients_finite)) {
    r.overflow = true;
    return;
  }
  r.finite = !r.nonfinite_loss && gradients_finite;
  if (!r.finite) return;
  optimizer_.offer_gradient_sum_squares(norm_sq);
  update(lr);
}

// Three flags: [0] a stop request, [1] a non-finite loss in the window, [2] a rank failed in the
// window. Summed (and scaled by 1/ranks, and by 1/S under loss scaling, S <= 2^24 keeping a flag
// far from float32's subnormals) with the gradients, so a value above zero means "some rank".
// Written where they live, in the gradients' dtype (float32, or float64 in the oracle mode), as
// the gradient exchange sums them: on a device by fills queued before backward, no host copy.
TrainStep::SidebandFlags TrainStep::take_sideband_flags(bool flag_this_loss) {
  const SidebandFlags flags{window_stop_, window_nonfinite_loss_, window_failed_, flag_this_loss};
  window_stop_ = window_nonfinite_loss_ = window_failed_ = false;
  return flags;
}

void TrainStep::write_sideband(const SidebandFlags& flags) {
  const ParamStore& params = ex_.params();
  const size_t element = dtype_size(params.dtype());
  const bool raised[3] = {flags.stop, flags.nonfinite_loss, flags.failed};
  params.ops().fill(params.sideband(), 3, 0.0);
  for (size_t i = 0; i < 3; ++i)
    if (raised[i]) params.ops().fill(static_cast<char*>(params.sideband()) + i * element, 1, 1.0);
  // The loss of this micro-batch, not yet read back, raises [1] where it is not finite.
  if (flags.flag_this_loss)
    ex_.flag_nonfinite_loss(static_cast<char*>(params.sideband()) + element);
}

// The update's facts, queued on the gradients the update applies (averaged, unscaled) beside the
// loss's values and read with them in one copy: on a device the step's one wait after backward.
// The sideband's flags as doubles, then the gradients' sum of squares, which a divided parameter's
// parts make a collective over its group: that one is summed on the host, where no rank failed
// (every rank knows it from the flags, so all of a group skip it together).
double TrainStep::read_update_facts(StepResult& r) {
  const ParamStore& params = ex_.params();
  double* facts = ex_.step_values_at(update_facts_);
  const bool divided = params.divided();
  params.ops().widen_into(params.sideband(), 3, facts);
  if (!divided) params.grad_sum_squares_into(facts + 3);
  r.loss = ex_.loss();
  r.decided = true;
  r.stop_requested = ex_.step_value(update_facts_) > 0;
  r.nonfinite_loss = ex_.step_value(update_facts_ + 1) > 0;
  r.rank_failed = ex_.step_value(update_facts_ + 2) > 0;
  if (!divided) return ex_.step_value(update_facts_ + 3);
  return r.rank_failed ? 0.0 : params.grad_sum_squares();
}

TrainStep::NonFiniteGradients TrainStep::find_nonfinite_gradients() const {
  return find_nonfinite_gradients(ex_.params());
}

TrainStep::NonFiniteGradients TrainStep::find_nonfinite_gradients(const ParamStore& params) {
  NonFiniteGradients out;
  for (size_t i = 0; i < params.slots().size(); ++i) {
    const ParamSlot& s = params.slots()[i];
    if (!s.spec.trainable) continue;
    if (std::isfinite(params.ops().sum_squares(params.grad(i).data(), s.count))) continue;
    if (out.count++ == 0) out.first = s.name;
  }
  return out;
}

void TrainStep::share_partial_sum(Communicator& comm) {
  if (comm.size() == 1 || !window_open()) return;
  const ParamStore& params = ex_.params();
  CREST_CHECK(params.dtype() == DType::f32, "data-parallel gradient accumulation needs float32");
  // The communicator works on host memory: on a device, through a host copy (a rare exchange,
  // when a window is cut short).
  HostStaging host(params.memory(), optimizer_.gradient_sum(), params.trainable_bytes());
  auto* sum = host.as<float>();
  for (const ParamStore::ByteRange& r : params.replicated_ranges(params.trainable_bytes()))
    comm.start_allreduce(sum + r.begin / sizeof(float), (r.end - r.begin) / sizeof(float),
                         1.0f / static_cast<float>(comm.size()), "partial gradient sum")
        ->wait();
  // A divided parameter's part: over the ranks that hold the same part.
  for (const ParamSlot& s : params.slots()) {
    Communicator* replicas = s.spec.shard ? s.spec.shard->replicas() : nullptr;
    if (replicas && replicas->size() > 1)
      replicas
          ->start_allreduce(sum + s.offset / sizeof(float), s.count,
                            1.0f / static_cast<float>(replicas->size()), "partial gradient sum")
          ->wait();
  }
  host.commit();
}

}  // namespace crest
