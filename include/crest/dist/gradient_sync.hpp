// GradientSync: data-parallel gradient averaging in buckets, overlapped with backward
// (DESIGN.md "Distribution"; docs/distributed.md).
//
// Buckets are slices of the flat gradient buffer taken in the order backward finishes the
// gradients (reverse execution order): a small first bucket, so communication starts as soon as
// the last layers are done, then buckets of `bucket_mb`. When backward finishes a bucket's last
// gradient, the bucket's allreduce starts on the communicator's thread while backward goes on;
// finish() waits for all of them. Average = sum over ranks, then scale by 1/size. The bucket that
// ends the trainable gradients also carries the parameter store's sideband (per-step flags such as
// a stop request, ParamStore::sideband()): they cross ranks inside a collective that runs anyway.
//
// Every rank must have the same layout, so it is verified at start: each rank's layout text
// (parameter names, shapes, buckets) is gathered and a mismatch is an error naming the first
// difference — never a silent exchange of the wrong bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crest/core/device_collectives.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/graph/param_store.hpp"

namespace crest {

// What travels: float32 gradients, or a 16-bit float (half the bytes; the sum is rounded to it at
// every addition — Horovod's compression idea). Gradients are scaled by 1/ranks before they are
// narrowed, so the sum is the average and stays in range. bf16 keeps float32's exponent range
// with 8 significant bits: the safe choice. fp16 keeps 11 significant bits but only values up to
// 65504 and down to 6e-8: larger gradients are refused (an error naming the bucket), smaller ones
// flush to zero. With dynamic loss scaling (set_loss_scale) fp16 carries the gradients still
// multiplied by the loss scale S, which lifts the small ones into its range, and a value beyond
// it travels as an infinity: an overflow like any other, which skips the step and lowers S.
enum class GradientCompression { none, bf16, fp16 };
GradientCompression parse_gradient_compression(const std::string& text);  // "none", "bf16", "fp16"
const char* gradient_compression_name(GradientCompression c);

struct GradientBucket {
  std::vector<int> slots;  // parameter slots, in ready order
  size_t begin_byte = 0,
         end_byte = 0;  // the slice of the flat gradient buffer (slots are adjacent)
  size_t bytes() const { return end_byte - begin_byte; }
};

struct GradientSyncStats {
  int64_t steps = 0;
  double allreduce_s = 0;    // time the buckets' allreduces ran on the communication thread
  double finish_wait_s = 0;  // time finish() waited for them after backward: not hidden
  // Share of allreduce time hidden behind backward (1 when nothing was communicated).
  double hidden_fraction() const {
    return allreduce_s > 0 ? std::clamp(1.0 - finish_wait_s / allreduce_s, 0.0, 1.0) : 1.0;
  }
};

// Communication against load imbalance, from every rank's per-step figures. A rank's wait after
// backward (and its collectives' duration) includes waiting for slower ranks to arrive: when rank
// 1's backward ends 80 ms after rank 0's, rank 0 waits 80 ms although the bytes take 1 ms. The
// rank that arrives last waits only for the network, so per step the smallest wait over the ranks
// is the communication not hidden, and the smallest collective time the communication itself;
// the largest wait minus the smallest is load imbalance. No clocks are compared across ranks.
struct OverlapFigures {
  double allreduce_s = 0;              // per step: the largest rank's collective time
  double exposed_s = 0;                // per step: the largest rank's wait after backward
  double communication_s = 0;          // per step: sum over steps of the smallest collective time
  double exposed_communication_s = 0;  // per step: sum over steps of the smallest wait
  double imbalance_s = 0;              // per step: exposed_s - exposed_communication_s
  // 1 - exposed / allreduce: what the slowest-waiting rank saw (imbalance counted as
  // communication).
  double hidden_fraction() const;
  // 1 - exposed communication / communication: the share of the network's time hidden behind
  // backward.
  double hidden_fraction_excluding_imbalance() const;
};
// `wait[r][k]`, `allreduce[r][k]`: rank r's wait after backward and collective time in step k
// (every rank the same number of steps). Throws crest::Error (usage) on ragged input.
OverlapFigures overlap_figures(const std::vector<std::vector<double>>& wait,
                               const std::vector<std::vector<double>>& allreduce);

// Collective: rank 0's `buffer` (laid out as `params`' flat buffers: its values or an optimizer
// state) replaces everyone's, except a divided parameter's part (ParamSpec::shard), which comes
// from the first of the ranks holding the same part.
void broadcast_store_layout(Communicator& comm, const ParamStore& params, void* buffer,
                            size_t bytes);
// Collective: every rank's `buffer` (laid out as `params`' flat buffers) becomes the mean over the
// ranks (float32 or float64), a divided parameter's part the mean over the ranks holding it.
// Local SGD's model averaging (TrainStep).
void average_store_layout(Communicator& comm, const ParamStore& params, void* buffer, size_t bytes);
// Collective: the mean over the ranks of `buffer`'s replicated parameters alone (a divided
// parameter's part stays this rank's). A spatial group's local SGD step: the group's shares of a
// split layer's gradient become the sample's, the dense head's parts are each rank's own.
void average_replicated(Communicator& comm, const ParamStore& params, void* buffer, size_t bytes);

class GradientSync {
 public:
  // `ready_order`: trainable slots in the order backward completes their gradients
  // (Executor::gradient_ready_order()). Sizes in MB (10^6 bytes).
  GradientSync(Communicator& comm, const ParamStore& params, const std::vector<int>& ready_order,
               double first_bucket_mb, double bucket_mb,
               GradientCompression compress = GradientCompression::none);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  int ranks() const;
  Communicator& communicator() const { return comm_; }
  // One line per slot and bucket: what must be identical on every rank.
  std::string layout() const;

  // Collective: every rank's layout equals rank 0's, else crest::Error (input) naming the rank
  // and the first line that differs.
  void verify_same_layout_everywhere();
  // Collective: rank 0's parameter values replace everyone's (trainable and non-trained state).
  void broadcast_parameters(ParamStore& params);

  // The hook for Executor::set_gradient_ready: starts a bucket's allreduce when its last slot
  // is ready. No-op on one rank.
  void gradient_ready(int slot);
  // Gradient lag (TrainStep): every bucket and part of `gradients`, a copy of the gradient buffer
  // (its sideband included), starts at once; they travel while the next step computes, and
  // finish() waits for them, leaving the average in `gradients`. The buckets wait for every
  // rank's arrival first, without holding a core: the next step's compute has them. No-op on
  // one rank.
  void start_all(void* gradients);
  // Waits for every bucket of this step (starting any not started, e.g. when no hook ran) and
  // leaves the averaged gradients in the buffer.
  void finish();

  // Parameters on a device whose backend offers collectives of its own (NCCL): the buckets are
  // reduced in place by `device` (its ranks are this communicator's) instead of through host
  // copies for MPI; finish() waits for them at most `timeout_s`. A spatial group's parts still
  // go through host copies (their communicators are other groups).
  void reduce_on_device(std::unique_ptr<DeviceCollectives> device, double timeout_s);
  const DeviceCollectives* device_collectives() const { return device_.get(); }
  // Parameters on a device reduced through host copies after all: why (the start-up line says).
  void note_host_copies(std::string reason) { host_copy_reason_ = std::move(reason); }
  // How the buckets travel, for the start-up line: "" in host memory, else "on the device
  // (nccl)" or "through host copies (<why>)".
  std::string reduction() const;

  // Dynamic loss scaling: this step's gradients arrive multiplied by `scale` (> 0), and finish()
  // leaves them divided by it again. The division costs no pass of its own where a multiply runs
  // anyway: it joins the allreduce's 1/ranks (float32) or the narrowing's (bf16); fp16 sums the
  // scaled values (see GradientCompression) and divides after widening. Set before the step's
  // first bucket starts. Never set (0): no loss scaling, and an fp16 overflow is an error. Does
  // nothing on one rank, where nothing is exchanged: the caller unscales.
  void set_loss_scale(double scale) { loss_scale_ = scale; }
  double loss_scale() const { return loss_scale_; }

  // A step recorded as a graph (crest.cuda_graphs, TrainStep) with its exchange inside: possible
  // where every bucket is reduced in place by the device's collectives without a read on the
  // host — no compression (narrowing reads the largest value back) and no divided parameter (a
  // part goes through host copies). "" where it is, else why not. Always "" on one rank.
  std::string why_not_recordable() const;
  // Inside the recording: starts every bucket not started yet, in bucket order, and puts the
  // device's stream behind the collectives without blocking (DeviceCollectives::join).
  void queue_finish();
  // After the recording's launch: waits for the stream, which holds the collectives, within the
  // deadline (DeviceCollectives::wait_stream), and counts the step.
  void finish_recorded();

  const GradientSyncStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  // The last finished step's buckets: when each was queued, ran and completed (timelines).
  const std::vector<PendingCollective::Timing>& last_step_timing() const { return last_timing_; }

 private:
  Communicator& comm_;
  const ParamStore& params_;
  // What the buckets are slices of: the gradient buffer, or start_all()'s copy until finish().
  void* gradients_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_slot_;  // slot -> bucket index, -1 for slots not synchronised
  // Parameters divided among a spatial group (ParamSpec::shard): in no bucket, each averaged
  // over its replicas (ParamShard::replicas) once backward finishes it.
  std::vector<int> parts_;         // their slots, in ready order
  std::vector<int> part_of_slot_;  // slot -> index into parts_, -1 for the others
  std::vector<std::unique_ptr<PendingCollective>> part_pending_;
  std::vector<bool> part_started_;
  std::vector<int> missing_;  // per bucket: slots not yet ready this step
  std::vector<std::unique_ptr<PendingCollective>> pending_;  // per bucket, this step
  // Gradient lag: every rank's arrival, queued before the buckets (Communicator::start_arrival).
  std::unique_ptr<PendingCollective> arrival_;
  GradientSyncStats stats_;
  std::vector<PendingCollective::Timing> last_timing_;
  GradientCompression compress_;
  double loss_scale_ = 0;  // 0: loss scaling off
  // The scale the buckets in flight were started with: under the gradient lag the next step sets
  // its own (set_loss_scale) before the lagged buckets finish.
  double started_loss_scale_ = 0;
  // 16-bit copy of the gradient buffer, in the parameters' memory (index = byte offset / 4).
  Buffer narrow_;
  uint16_t* narrow_codes() const { return static_cast<uint16_t*>(narrow_.data()); }
  // Parameters in device memory: the communicator works on host memory, so each collective runs
  // on the same range of a host mirror of the gradients (or of their 16-bit codes), copied from
  // the device when it starts and back when it finishes (docs/distributed.md). Empty on a host
  // backend, where the collectives run in place. Allocated once.
  std::vector<char> host_gradients_, host_codes_;
  bool staged() const { return !params_.memory().is_host(); }
  // reduce_on_device()'s collectives, and finish()'s deadline for them.
  std::unique_ptr<DeviceCollectives> device_;
  double device_timeout_s_ = 0;
  std::string host_copy_reason_;
  void start_on_device(size_t b, void* values, size_t n, DType dtype, double scale,
                       const std::string& what);
  void refuse_fp16_overflow(double largest, const std::string& what) const;
  void* stage(void* device_base, std::vector<char>& mirror, size_t offset, size_t bytes);
  void unstage(void* device_base, const std::vector<char>& mirror, size_t offset, size_t bytes);
  void start_bucket(size_t b);
  void finish_bucket(size_t b);
  void start_part(size_t i);
  void finish_parts();
  void carry_sideband();
};

}  // namespace crest
