// DataLoader: feeds one rank's batches of a SampleSource ahead of compute.
//
// A pool of threads reads (file I/O, gzip inflate) and decodes (parse, check, transform) samples
// of the batches ahead, in parallel across files, straight into a ring of batch buffers
// (`prefetch` batches ahead plus the one being consumed). The trainer points the executor's
// inputs at the ready buffer (Executor::bind_input), so a batch is never copied. Batches come out
// in the epoch's order whatever order the threads finish in, so a run is deterministic.
//
// A bounded cache keeps sample payloads (the decompressed file contents) read in the first epoch
// and serves them from the second epoch on, skipping I/O and inflate.
//
// Bad samples: with skip_bad_samples false (data.on_error: fail) the first error is rethrown by
// next(), naming the file. With true (skip), the sample is dropped, counted and remembered, and its
// place in the batch is filled with one of this rank's spare samples of the epoch (the remainder
// the epoch would otherwise drop); when no spare is left, next() fails saying so.
//
// every_sample (validation that must see every sample, as DeepCAM's): nothing is dropped, the
// last batch of a rank may be partial, and a skipped sample leaves its place empty; a batch says
// which of its places hold a sample (LoadedBatch::present), and empty places are zeros.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "crest/core/tensor.hpp"
#include "crest/data/sample_source.hpp"
#include "crest/data/sharding.hpp"

namespace crest {

class Communicator;

struct LoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = true;  // crest's order only: false keeps sorted order
  // crest's order: the permutation's seed; reference order: the sampler's seed (the reference's
  // DistributedSampler uses 0), epoch e drawn with seed + e.
  uint64_t seed = 0;
  TrainOrder order = TrainOrder::crest;
  int prefetch = 4;         // batches decoded ahead of the one being consumed (>= 1)
  int threads = 0;          // reader/decoder threads; 0 = min(4, hardware threads)
  int64_t cache_bytes = 0;  // payload cache bound; 0 = no cache
  bool skip_bad_samples = false;
  bool every_sample = false;  // read every sample once per epoch (plan_shards' every_sample)
  // The samples' dtype in the batches: f32 as decoded, or bf16 / f16 for a model whose data input
  // is 16-bit (CompileOptions::half_inputs): each sample is decoded in float32 on its reader
  // thread and narrowed into the batch (to nearest even, as BatchFeed would), so the ring holds
  // half the bytes and the model reads the batch in place.
  DType sample_dtype = DType::f32;
  // Where the ring's batch buffers live: host_memory() when null. A device model's loader takes
  // its backend's staging memory (page-locked on a GPU), from which a batch is copied to the
  // device at the link's speed while the step before it computes (BatchFeed::stage).
  MemoryResource* batch_memory = nullptr;
  // Batches the consumer holds at once: 2 where it reads the next batch while it feeds this one
  // (BatchAhead), so that `prefetch` batches are still decoded ahead meanwhile.
  int held = 1;
};

// Counters of one epoch (reset by start_epoch).
struct LoaderStats {
  int64_t batches = 0, samples = 0;
  int64_t payload_bytes = 0;  // decompressed bytes read from files (cache misses)
  int64_t cache_hits = 0;
  int64_t skipped = 0;  // bad samples dropped this epoch
  double wait_s = 0;    // time next() blocked: the consumer starved
  double read_s = 0;    // summed over threads: file I/O + inflate
  double decode_s = 0;  // summed over threads: parse + check + transform
};

// A ready batch: views of the loader's buffers, valid until release(). x is channels-last
// [batch, spec.x_shape...] in LoaderOptions::sample_dtype (float32 unless asked); y is float32
// [batch, targets] or int32 [batch, H, W]. The views always hold batch_size places; only
// every_sample loaders leave some empty.
struct LoadedBatch {
  int64_t index = -1;                   // within the epoch
  TensorView sample, target;            // the samples' data and their targets, batch first
  int64_t samples = 0;                  // places holding a sample
  std::span<const uint8_t> present;     // per place: 1 when it holds a sample, 0 when empty
  std::span<const int64_t> sample_ids;  // per place: its sample's source index, -1 when empty
  int slot = -1;
  bool complete() const { return samples == static_cast<int64_t>(present.size()); }
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const SampleSource> source, const LoaderOptions& options,
             const Communicator& comm);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  const ShardPlan& plan() const { return plan_; }
  const SampleSource& source() const { return *source_; }
  int threads() const { return static_cast<int>(workers_.size()); }
  int64_t cached_bytes() const;

  // Starts reading epoch `epoch` (0-based; its order from (order, seed, epoch)) at batch
  // `first_batch` (> 0 when a run resumes mid-epoch: the batches before it are neither read nor
  // returned). The previous epoch's batches must all have been released.
  void start_epoch(int epoch, int64_t first_batch = 0);
  // The next batch of the epoch, in order; blocks until it is decoded. Rethrows a read/decode
  // error (crest::Error naming the file). Throws when the epoch has no batch left.
  LoadedBatch next();
  void release(const LoadedBatch& batch);
  const LoaderStats& stats() const { return stats_; }
  // Source indices of the samples skipped as bad so far (data.on_error: skip), sorted.
  std::vector<int64_t> bad_samples() const;
  // Sample ids (source indices) of this rank in the epoch's consumption order (for tests).
  const std::vector<int64_t>& epoch_samples() const { return samples_; }

 private:
  struct Slot;
  struct Task {
    int slot;
    int64_t position;  // within the batch
    int64_t sample;
  };
  // Leaves place `position` of `slot` empty: zeros, marked absent (every_sample).
  void clear_place(Slot& slot, int64_t position) const;
  // Bytes of one sample's x in a batch (in sample_dtype).
  size_t x_place_bytes() const;
  // Decodes `sample` into place `position` of `slot` (through a float32 copy when narrowing).
  void decode_into(Slot& slot, int64_t position, int64_t sample,
                   std::span<const std::byte> payload) const;
  void worker_loop();
  void schedule_locked();
  void run_task(const Task& t);
  // Fetches sample's payload from the cache or the source; returns a pointer to cached bytes or
  // fills `scratch`.
  std::span<const std::byte> payload_of(int64_t sample, std::vector<std::byte>& scratch,
                                        LoaderStats& local);
  bool take_spare_locked(int64_t& sample);

  std::shared_ptr<const SampleSource> source_;
  LoaderOptions opts_;
  ShardPlan plan_;
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::deque<Task> tasks_;
  bool stop_ = false;
  std::vector<int64_t> samples_;  // this epoch, this rank: used then spares
  int64_t next_spare_ = 0;        // index into samples_
  int64_t scheduled_ = 0, consumed_ = 0;
  int in_flight_ = 0;                        // tasks taken by a worker and not finished
  std::unordered_set<int64_t> bad_samples_;  // remembered across epochs (skip mode)
  LoaderStats stats_;

  mutable std::shared_mutex cache_mu_;
  std::unordered_map<int64_t, std::vector<std::byte>> cache_;  // nodes are stable: no eviction
  int64_t cache_used_ = 0;
  int epoch_ = -1;

  std::vector<std::thread> workers_;
};

}  // namespace crest
