#include "crest/data/loader.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "crest/core/cpus.hpp"
#include "crest/core/error.hpp"
#include "crest/core/half_codes.hpp"
#include "crest/data/deepcam_reference_order.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The epoch's order of the n samples of the source, by the chosen recipe.
std::vector<int64_t> order_of_epoch(const LoaderOptions& o, int64_t n, int epoch) {
  if (o.order == TrainOrder::reference) return deepcam_reference_epoch_order(n, o.seed, epoch);
  return epoch_order(n, o.shuffle, o.seed, epoch);
}

}  // namespace

struct DataLoader::Slot {
  Buffer x, y;
  std::vector<uint8_t> present;  // per place: holds a sample
  std::vector<int64_t> ids;      // per place: the source index of its sample (-1: empty)
  int64_t batch = -1;            // batch index within the epoch being filled / held
  int64_t remaining = 0;         // samples still to decode
  enum class State { free, filling, ready, held } state = State::free;
  std::exception_ptr error;  // first failure among its samples (fail mode, or no spare left)
};

DataLoader::DataLoader(std::shared_ptr<const SampleSource> source, const LoaderOptions& options,
                       const Communicator& comm)
    : source_(std::move(source)), opts_(options) {
  CREST_CHECK(source_ != nullptr, "loader without a source");
  if (opts_.prefetch < 1) throw_input("data.prefetch must be at least 1");
  if (opts_.sample_dtype != DType::f32 && !is_half(opts_.sample_dtype))
    throw_usage("the loader decodes samples into f32, bf16 or f16, not " +
                dtype_name(opts_.sample_dtype));
  plan_ =
      plan_shards(source_->size(), opts_.batch_size, comm.rank(), comm.size(), opts_.every_sample);
  const SampleSpec& spec = source_->spec();
  // The slots held by the consumer plus `prefetch` being filled; no more than the epoch has
  // batches.
  if (opts_.held < 1) throw_usage("the loader's consumer holds at least one batch");
  const int64_t n_slots =
      std::min<int64_t>(opts_.prefetch + opts_.held, plan_.batches + opts_.held);
  for (int64_t i = 0; i < n_slots; ++i) {
    auto s = std::make_unique<Slot>();
    MemoryResource& memory = opts_.batch_memory ? *opts_.batch_memory : host_memory();
    s->x = Buffer(x_place_bytes() * static_cast<size_t>(opts_.batch_size), 256, memory);
    s->y = Buffer(spec.y_bytes() * static_cast<size_t>(opts_.batch_size), 256, memory);
    s->present.assign(static_cast<size_t>(opts_.batch_size), 1);
    s->ids.assign(static_cast<size_t>(opts_.batch_size), -1);
    slots_.push_back(std::move(s));
  }
  int threads = opts_.threads;
  if (threads <= 0) threads = std::min(usable_cpus(), 4);
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    tasks_.clear();
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t DataLoader::cached_bytes() const {
  std::shared_lock lock(cache_mu_);
  return cache_used_;
}

void DataLoader::start_epoch(int epoch, int64_t first_batch) {
  if (first_batch < 0 || first_batch > plan_.batches)
    throw_runtime("internal error: DataLoader::start_epoch at batch " +
                  std::to_string(first_batch) + " of " + std::to_string(plan_.batches));
  std::unique_lock lock(mu_);
  for (const auto& s : slots_)
    if (s->state == Slot::State::held)
      throw_runtime("internal error: DataLoader::start_epoch while a batch is still held");
  // Drop what is queued for the previous epoch and let running tasks finish: the slots are reused.
  tasks_.clear();
  ready_cv_.wait(lock, [&] { return in_flight_ == 0; });
  for (auto& s : slots_) {
    s->state = Slot::State::free;
    s->error = nullptr;
  }
  epoch_ = epoch;
  samples_ = rank_samples(plan_, order_of_epoch(opts_, plan_.samples, epoch));
  next_spare_ = plan_.used_per_rank();
  scheduled_ = consumed_ = first_batch;
  stats_ = LoaderStats{};
  schedule_locked();
}

size_t DataLoader::x_place_bytes() const {
  return static_cast<size_t>(source_->spec().x_shape.numel()) * dtype_size(opts_.sample_dtype);
}

void DataLoader::decode_into(Slot& slot, int64_t position, int64_t sample,
                             std::span<const std::byte> payload) const {
  char* place = static_cast<char*>(slot.x.data()) + x_place_bytes() * static_cast<size_t>(position);
  void* y =
      static_cast<char*>(slot.y.data()) + source_->spec().y_bytes() * static_cast<size_t>(position);
  const SampleDraw draw{opts_.seed, epoch_};
  if (opts_.sample_dtype == DType::f32)
    return source_->decode_drawn(sample, payload, reinterpret_cast<float*>(place), y, draw);
  thread_local std::vector<float> wide;  // one sample in float32 before it is narrowed
  const auto n = static_cast<size_t>(source_->spec().x_shape.numel());
  wide.resize(n);
  source_->decode_drawn(sample, payload, wide.data(), y, draw);
  floats_to_half_codes(wide.data(), reinterpret_cast<uint16_t*>(place), n, opts_.sample_dtype);
}

void DataLoader::clear_place(Slot& slot, int64_t position) const {
  const SampleSpec& spec = source_->spec();
  const auto p = static_cast<size_t>(position);
  // A targets-only source (targets_of_samples) has no sample bytes, and its x buffer no memory.
  if (x_place_bytes() > 0)
    std::memset(static_cast<char*>(slot.x.data()) + x_place_bytes() * p, 0, x_place_bytes());
  std::memset(static_cast<char*>(slot.y.data()) + spec.y_bytes() * p, 0, spec.y_bytes());
  slot.present[p] = 0;
  slot.ids[p] = -1;
}

void DataLoader::schedule_locked() {
  if (epoch_ < 0) return;
  const int64_t b = opts_.batch_size;
  bool added = false;
  for (size_t i = 0; i < slots_.size() && scheduled_ < plan_.batches; ++i) {
    Slot& s = *slots_[i];
    if (s.state != Slot::State::free) continue;
    // Only an every-sample plan's last batch holds fewer than b samples.
    const int64_t count = std::min(b, plan_.used_per_rank() - scheduled_ * b);
    s.state = count > 0 ? Slot::State::filling : Slot::State::ready;
    s.batch = scheduled_;
    s.remaining = count;
    s.error = nullptr;
    std::fill(s.present.begin(), s.present.end(), uint8_t{1});
    for (int64_t p = count; p < b; ++p) clear_place(s, p);
    for (int64_t p = 0; p < count; ++p) {
      const int64_t sample = samples_[static_cast<size_t>(scheduled_ * b + p)];
      s.ids[static_cast<size_t>(p)] = sample;
      tasks_.push_back({static_cast<int>(i), p, sample});
    }
    ++scheduled_;
    added = true;
  }
  if (added) work_cv_.notify_all();
}

LoadedBatch DataLoader::next() {
  const auto t0 = Clock::now();
  std::unique_lock lock(mu_);
  if (epoch_ < 0) throw_runtime("internal error: DataLoader::next before start_epoch");
  if (consumed_ >= plan_.batches)
    throw_runtime("internal error: DataLoader::next past the end of the epoch");
  Slot* slot = nullptr;
  int slot_index = -1;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i]->state != Slot::State::free && slots_[i]->batch == consumed_) {
      slot = slots_[i].get();
      slot_index = static_cast<int>(i);
    }
  CREST_CHECK(slot != nullptr, "the next batch was never scheduled");
  // An error surfaces with the batch it belongs to, not earlier.
  ready_cv_.wait(lock, [&] { return slot->state == Slot::State::ready || slot->error; });
  stats_.wait_s += seconds_since(t0);
  if (slot->error) std::rethrow_exception(slot->error);
  slot->state = Slot::State::held;
  LoadedBatch out;
  out.index = consumed_++;
  out.slot = slot_index;
  const SampleSpec& spec = source_->spec();
  out.sample = TensorView(slot->x.data(), {spec.x_shape.with_batch(opts_.batch_size),
                                           opts_.sample_dtype, Device::cpu, Layout::plain});
  out.target = TensorView(slot->y.data(),
                          {spec.y_shape.with_batch(opts_.batch_size),
                           spec.y_integer ? DType::i32 : DType::f32, Device::cpu, Layout::plain});
  out.present = slot->present;
  out.sample_ids = slot->ids;
  out.samples = std::count(slot->present.begin(), slot->present.end(), uint8_t{1});
  ++stats_.batches;
  stats_.samples += out.samples;
  return out;
}

void DataLoader::release(const LoadedBatch& batch) {
  std::lock_guard lock(mu_);
  CREST_CHECK(batch.slot >= 0 && static_cast<size_t>(batch.slot) < slots_.size(),
              "release of an unknown batch");
  Slot& s = *slots_[static_cast<size_t>(batch.slot)];
  CREST_CHECK(s.state == Slot::State::held && s.batch == batch.index,
              "release of a batch not held");
  s.state = Slot::State::free;
  schedule_locked();
}

std::vector<int64_t> DataLoader::bad_samples() const {
  std::lock_guard lock(mu_);
  std::vector<int64_t> out(bad_samples_.begin(), bad_samples_.end());
  std::sort(out.begin(), out.end());
  return out;
}

bool DataLoader::take_spare_locked(int64_t& sample) {
  while (next_spare_ < static_cast<int64_t>(samples_.size())) {
    const int64_t cand = samples_[static_cast<size_t>(next_spare_++)];
    if (!bad_samples_.count(cand)) {
      sample = cand;
      return true;
    }
  }
  return false;
}

std::span<const std::byte> DataLoader::payload_of(int64_t sample, std::vector<std::byte>& scratch,
                                                  LoaderStats& local) {
  if (opts_.cache_bytes > 0) {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(sample);
    if (it != cache_.end()) {
      ++local.cache_hits;
      return it->second;  // entries are never erased or modified: safe to read unlocked
    }
  }
  const auto t0 = Clock::now();
  source_->read(sample, scratch);
  local.read_s += seconds_since(t0);
  local.payload_bytes += static_cast<int64_t>(scratch.size());
  if (opts_.cache_bytes > 0) {
    std::unique_lock lock(cache_mu_);
    if (cache_used_ + static_cast<int64_t>(scratch.size()) <= opts_.cache_bytes &&
        !cache_.count(sample)) {
      auto& entry = cache_[sample];
      entry = scratch;
      cache_used_ += static_cast<int64_t>(entry.size());
      return entry;
    }
  }
  return scratch;
}

void DataLoader::run_task(const Task& t) {
  Slot& slot = *slots_[static_cast<size_t>(t.slot)];
  thread_local std::vector<std::byte> scratch;
  LoaderStats local;
  int64_t sample = t.sample;
  std::exception_ptr failure;
  for (;;) {
    bool known_bad = false;
    if (opts_.skip_bad_samples) {
      std::lock_guard lock(mu_);
      known_bad = bad_samples_.count(sample) > 0;
    }
    if (!known_bad) {
      try {
        const std::span<const std::byte> payload = payload_of(sample, scratch, local);
        const auto t0 = Clock::now();
        decode_into(slot, t.position, sample, payload);
        local.decode_s += seconds_since(t0);
        break;
      } catch (const Error& e) {
        if (!opts_.skip_bad_samples || e.kind() == ErrorKind::runtime) {
          failure = std::current_exception();
          break;
        }
      } catch (...) {
        failure = std::current_exception();
        break;
      }
    }
    // Skip mode: drop the sample, remember it, continue with a spare sample of the epoch (an
    // every-sample plan has none: the place stays empty).
    std::lock_guard lock(mu_);
    if (!known_bad) {
      bad_samples_.insert(sample);
      ++stats_.skipped;
    }
    if (opts_.every_sample) {
      clear_place(slot, t.position);
      break;
    }
    if (!take_spare_locked(sample)) {
      failure = std::make_exception_ptr(Error(
          ErrorKind::input,
          "data.on_error=skip: " + std::to_string(stats_.skipped) +
              " bad samples skipped this epoch and no spare sample is left on this rank "
              "to complete batch " +
              std::to_string(slot.batch) + " (last bad file: " + source_->path(t.sample) + ")"));
      break;
    }
  }
  std::lock_guard lock(mu_);
  if (!failure && slot.present[static_cast<size_t>(t.position)])
    slot.ids[static_cast<size_t>(t.position)] = sample;  // a spare may have replaced a bad one
  stats_.payload_bytes += local.payload_bytes;
  stats_.cache_hits += local.cache_hits;
  stats_.read_s += local.read_s;
  stats_.decode_s += local.decode_s;
  --in_flight_;
  if (failure && !slot.error) slot.error = failure;
  if (--slot.remaining == 0 && !slot.error) slot.state = Slot::State::ready;
  ready_cv_.notify_all();
}

void DataLoader::worker_loop() {
  // Parallelism here is across samples; a decoder's own OpenMP loops stay single-threaded so the
  // loader never oversubscribes the cores the compute threads use.
  omp_set_num_threads(1);
  for (;;) {
    Task t;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (stop_) return;
      t = tasks_.front();
      tasks_.pop_front();
      ++in_flight_;
    }
    run_task(t);
  }
}

}  // namespace crest
