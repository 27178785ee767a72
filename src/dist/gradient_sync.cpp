#include "crest/dist/gradient_sync.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/core/units.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest {

GradientCompression parse_gradient_compression(const std::string& text) {
  if (text == "none") return GradientCompression::none;
  if (text == "bf16") return GradientCompression::bf16;
  if (text == "fp16") return GradientCompression::fp16;
  throw_input("unknown gradient compression '" + text + "' (expected none, bf16 or fp16)");
}

double OverlapFigures::hidden_fraction() const {
  return allreduce_s > 0 ? std::clamp(1.0 - exposed_s / allreduce_s, 0.0, 1.0) : 1.0;
}

double OverlapFigures::hidden_fraction_excluding_imbalance() const {
  return communication_s > 0 ? std::clamp(1.0 - exposed_communication_s / communication_s, 0.0, 1.0)
                             : 1.0;
}

OverlapFigures overlap_figures(const std::vector<std::vector<double>>& wait,
                               const std::vector<std::vector<double>>& allreduce) {
  OverlapFigures f;
  if (wait.empty() || wait.size() != allreduce.size())
    throw_usage("overlap_figures: one row per rank in both");
  const size_t steps = wait[0].size();
  for (size_t r = 0; r < wait.size(); ++r)
    if (wait[r].size() != steps || allreduce[r].size() != steps)
      throw_usage("overlap_figures: every rank needs the same number of steps");
  if (steps == 0) return f;
  std::vector<double> wait_total(wait.size(), 0), allreduce_total(wait.size(), 0);
  for (size_t k = 0; k < steps; ++k) {
    double min_wait = wait[0][k], min_allreduce = allreduce[0][k];
    for (size_t r = 0; r < wait.size(); ++r) {
      min_wait = std::min(min_wait, wait[r][k]);
      min_allreduce = std::min(min_allreduce, allreduce[r][k]);
      wait_total[r] += wait[r][k];
      allreduce_total[r] += allreduce[r][k];
    }
    f.exposed_communication_s += min_wait;
    f.communication_s += min_allreduce;
  }
  const auto n = static_cast<double>(steps);
  f.exposed_s = *std::max_element(wait_total.begin(), wait_total.end()) / n;
  f.allreduce_s = *std::max_element(allreduce_total.begin(), allreduce_total.end()) / n;
  f.exposed_communication_s /= n;
  f.communication_s /= n;
  f.imbalance_s = std::max(0.0, f.exposed_s - f.exposed_communication_s);
  return f;
}

const char* gradient_compression_name(GradientCompression c) {
  return c == GradientCompression::bf16 ? "bf16" : c == GradientCompression::fp16 ? "fp16" : "none";
}

GradientSync::GradientSync(Communicator& comm, const ParamStore& params,
                           const std::vector<int>& ready_order, double first_bucket_mb,
                           double bucket_mb, GradientCompression compress)
    : comm_(comm),
      params_(params),
      gradients_(params.grads()),
      bucket_of_slot_(params.slots().size(), -1),
      part_of_slot_(params.slots().size(), -1),
      compress_(compress) {
  // Gradients travel in the parameters' dtype: float32, or float64 (the oracle mode); the
  // 16-bit compressions narrow float32 only.
  if (params.dtype() != DType::f32 && params.dtype() != DType::f64 && comm.size() > 1)
    throw_usage(
        "gradient synchronisation across ranks supports float32 and float64 parameters, "
        "not " +
        dtype_name(params.dtype()));
  if (params.dtype() == DType::f64 && compress != GradientCompression::none && comm.size() > 1)
    throw_usage(std::string("dist.compress: ") + gradient_compression_name(compress) +
                " narrows float32 gradients; crest.precision: float64 needs dist.compress: none");
  const auto& slots = params.slots();
  GradientBucket cur;
  auto limit = [&] {
    return static_cast<size_t>((buckets_.empty() ? first_bucket_mb : bucket_mb) * 1e6);
  };
  auto close = [&] {
    if (cur.slots.empty()) return;
    buckets_.push_back(cur);
    cur = GradientBucket{};
  };
  int lo = 0, hi = 0;  // the bucket's slot index range [lo, hi]
  for (int s : ready_order) {
    const ParamSlot& slot = slots.at(static_cast<size_t>(s));
    if (!slot.spec.trainable)
      throw_usage("gradient_ready_order lists non-trainable slot " + slot.name);
    if (slot.spec.shard) {  // a part: averaged over its replicas, in no bucket
      part_of_slot_[static_cast<size_t>(s)] = static_cast<int>(parts_.size());
      parts_.push_back(s);
      continue;
    }
    const size_t begin = slot.offset, end = slot.offset + slot.count * dtype_size(params.dtype());
    // A bucket is one slice of the flat buffer: slots lie in index order, so a slot joins only
    // when its index borders the bucket's (the zero padding between aligned slots rides along).
    const bool adjacent = !cur.slots.empty() && (s == lo - 1 || s == hi + 1);
    if (!cur.slots.empty() && (!adjacent || cur.bytes() >= limit())) close();
    if (cur.slots.empty()) {
      cur.begin_byte = begin;
      cur.end_byte = end;
      lo = hi = s;
    } else {
      cur.begin_byte = std::min(cur.begin_byte, begin);
      cur.end_byte = std::max(cur.end_byte, end);
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
    cur.slots.push_back(s);
  }
  close();
  carry_sideband();
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int s : buckets_[b].slots) {
      if (bucket_of_slot_[static_cast<size_t>(s)] != -1)
        throw_usage("gradient_ready_order lists slot " + slots[static_cast<size_t>(s)].name +
                    " twice");
      bucket_of_slot_[static_cast<size_t>(s)] = static_cast<int>(b);
    }
  // Allocated once: a training step allocates nothing.
  const size_t gradient_bytes = params.trainable_bytes() + ParamStore::kSidebandBytes;
  const size_t code_bytes = gradient_bytes / sizeof(float) * sizeof(uint16_t);
  if (compress_ != GradientCompression::none && comm_.size() > 1)
    narrow_ = Buffer(code_bytes, 256, params.memory());
  if (staged() && comm_.size() > 1) {
    host_gradients_.resize(gradient_bytes);
    if (compress_ != GradientCompression::none) host_codes_.resize(code_bytes);
  }
  missing_.assign(buckets_.size(), 0);
  pending_.resize(buckets_.size());
  part_pending_.resize(parts_.size());
  part_started_.assign(parts_.size(), false);
  for (size_t b = 0; b < buckets_.size(); ++b)
    missing_[b] = static_cast<int>(buckets_[b].slots.size());
}

GradientSync::~GradientSync() = default;

// The bucket holding the last trainable slice reaches on over the padding to the end of the
// sideband (ParamStore::sideband()): its allreduce sums the per-step flags with the gradients.
// Padding and sideband are zero unless written, so the gradients' sum is unchanged.
void GradientSync::carry_sideband() {
  const size_t end = params_.trainable_bytes() + ParamStore::kSidebandBytes;
  for (GradientBucket& b : buckets_)
    if (b.end_byte <= params_.trainable_bytes() && b.end_byte + 256 > params_.trainable_bytes()) {
      b.end_byte = end;
      return;
    }
  // The last trainable slice is a divided parameter's part, in no bucket: the sideband travels
  // in a bucket of its own.
  buckets_.push_back({{}, params_.trainable_bytes(), end});
}

std::string GradientSync::layout() const {
  std::ostringstream os;
  const auto& slots = params_.slots();
  os << "compression " << gradient_compression_name(compress_) << "\n";
  for (const auto& s : slots)
    os << "param " << s.name << " "
       << (s.spec.shard ? s.spec.shard->whole_shape().str() + " (parts)" : s.shape.str())
       << " offset " << s.offset << (s.spec.trainable ? "" : " (state)") << "\n";
  for (size_t b = 0; b < buckets_.size(); ++b) {
    os << "bucket " << b << " bytes [" << buckets_[b].begin_byte << ", " << buckets_[b].end_byte
       << "):";
    for (int s : buckets_[b].slots) os << " " << slots[static_cast<size_t>(s)].name;
    os << "\n";
  }
  return os.str();
}

void GradientSync::verify_same_layout_everywhere() {
  if (comm_.size() == 1) return;
  const std::string mine = layout();
  std::vector<std::byte> bytes(mine.size());
  std::memcpy(bytes.data(), mine.data(), mine.size());
  const auto parts = comm_.allgather_parts(bytes);
  const std::string& reference =
      std::string(reinterpret_cast<const char*>(parts.at(0).data()), parts.at(0).size());
  for (size_t r = 1; r < parts.size(); ++r) {
    const std::string other(reinterpret_cast<const char*>(parts[r].data()), parts[r].size());
    if (other == reference) continue;
    std::istringstream a(reference), b(other);
    std::string la, lb;
    int line = 0;
    for (;;) {
      const bool ha = static_cast<bool>(std::getline(a, la)),
                 hb = static_cast<bool>(std::getline(b, lb));
      ++line;
      if (!ha) la = "(nothing)";
      if (!hb) lb = "(nothing)";
      if (la != lb || (!ha && !hb)) break;
    }
    throw_input("rank " + std::to_string(r) +
                " built a different model than rank 0 (gradient layout line " +
                std::to_string(line) + ": rank 0 has '" + la + "', rank " + std::to_string(r) +
                " has '" + lb + "'); every rank must run the same config");
  }
}

void GradientSync::broadcast_parameters(ParamStore& params) {
  broadcast_store_layout(comm_, params, params.values(), params.bytes());
}

void GradientSync::reduce_on_device(std::unique_ptr<DeviceCollectives> device, double timeout_s) {
  CREST_CHECK(staged(), "collectives on the device for parameters in host memory");
  device_ = std::move(device);
  device_timeout_s_ = timeout_s;
  // The buckets never leave the device now; a spatial group's parts still do.
  host_codes_ = {};
  if (parts_.empty()) host_gradients_ = {};
}

std::string GradientSync::reduction() const {
  if (!staged()) return "";
  if (device_) return "on the device (" + device_->name() + ")";
  return "through host copies" + (host_copy_reason_.empty() ? "" : " (" + host_copy_reason_ + ")");
}

namespace {

// A bucket queued on the device: its wait is the collectives' wait (every bucket queued before
// completes with it, so a later bucket's wait returns at once).
class DeviceBucket final : public PendingCollective {
 public:
  DeviceBucket(DeviceCollectives& device, double timeout_s, std::string what)
      : device_(device), timeout_s_(timeout_s), what_(std::move(what)) {
    timing_.queued = timing_.started = steady_seconds();
  }
  void wait() override {
    if (timing_.done > 0) return;
    device_.wait(timeout_s_, what_);
    timing_.done = steady_seconds();
  }
  Timing timing() const override { return timing_; }

 private:
  DeviceCollectives& device_;
  double timeout_s_;
  std::string what_;
  Timing timing_;
};

}  // namespace

void GradientSync::start_on_device(size_t b, void* values, size_t n, DType dtype, double scale,
                                   const std::string& what) {
  device_->allreduce_sum(values, n, dtype, scale);
  pending_[b] =
      std::make_unique<DeviceBucket>(*device_, device_timeout_s_, what + " on " + device_->name());
}

void* GradientSync::stage(void* device_base, std::vector<char>& mirror, size_t offset,
                          size_t bytes) {
  auto* device = static_cast<char*>(device_base) + offset;
  if (!staged()) return device;
  // Waits for the queued kernels that write the range (a backward still running on the device).
  params_.memory().copy_to_host(mirror.data() + offset, device, bytes);
  return mirror.data() + offset;
}

void GradientSync::unstage(void* device_base, const std::vector<char>& mirror, size_t offset,
                           size_t bytes) {
  if (staged())
    params_.memory().copy_to_device(static_cast<char*>(device_base) + offset,
                                    mirror.data() + offset, bytes);
}

void GradientSync::start_bucket(size_t b) {
  const GradientBucket& bk = buckets_[b];
  auto* base = static_cast<char*>(gradients_);
  const bool narrow = compress_ != GradientCompression::none;
  const std::string what = "allreduce of gradient bucket " + std::to_string(b + 1) + "/" +
                           std::to_string(buckets_.size()) + " (" +
                           human_bytes(static_cast<double>(narrow ? bk.bytes() / 2 : bk.bytes())) +
                           (narrow ? std::string(" ") + gradient_compression_name(compress_) : "") +
                           ", step " + std::to_string(stats_.steps + 1) + ")";
  // 1/ranks makes the sum an average; 1/S (loss scaling) undoes the loss scale in the same
  // multiply (S is a power of two unless configured otherwise: dividing by it is exact, so the
  // result has the bits of an unscaled run's). fp16 keeps S until after widening.
  const bool fp16 = compress_ == GradientCompression::fp16;
  started_loss_scale_ = loss_scale_;    // fp16 unscales in finish(), maybe after the next step's S
  if (params_.dtype() == DType::f64) {  // never compressed (the constructor refuses it)
    double scale = 1.0 / comm_.size();
    if (loss_scale_ > 0) scale /= loss_scale_;
    if (device_)
      return start_on_device(b, base + bk.begin_byte, bk.bytes() / sizeof(double), DType::f64,
                             scale, what);
    auto* values = static_cast<double*>(stage(base, host_gradients_, bk.begin_byte, bk.bytes()));
    pending_[b] = comm_.start_allreduce(values, bk.bytes() / sizeof(double), scale, what);
    return;
  }
  auto* grads = reinterpret_cast<float*>(base + bk.begin_byte);
  const size_t n = bk.bytes() / sizeof(float);
  float scale = 1.f / static_cast<float>(comm_.size());
  if (loss_scale_ > 0 && !fp16) scale = static_cast<float>(scale / loss_scale_);
  if (!narrow && device_) return start_on_device(b, grads, n, DType::f32, scale, what);
  if (!narrow) {
    auto* values = static_cast<float*>(stage(base, host_gradients_, bk.begin_byte, bk.bytes()));
    pending_[b] = comm_.start_allreduce(values, n, scale, what);
    return;
  }
  // Scaled before narrowing: the sum of the ranks' shares is the average, within range whenever
  // every share is.
  const size_t first_code = bk.begin_byte / sizeof(float);
  const double largest = params_.ops().narrow(grads, scale, narrow_codes() + first_code, n,
                                              fp16 ? DType::f16 : DType::bf16);
  if (fp16) refuse_fp16_overflow(largest, what);
  if (device_)
    return start_on_device(b, narrow_codes() + first_code, n, fp16 ? DType::f16 : DType::bf16, 1.0,
                           what);
  auto* out = static_cast<uint16_t*>(
      stage(narrow_codes(), host_codes_, first_code * sizeof(uint16_t), n * sizeof(uint16_t)));
  pending_[b] = comm_.start_allreduce_16(out, n, fp16 ? Float16::fp16 : Float16::bf16, what);
}

// An infinite fp16 sum would silently poison every weight: refuse instead, saying what to do.
// Under loss scaling the infinity is the overflow the scaler looks for (TrainStep skips the step).
void GradientSync::refuse_fp16_overflow(double largest, const std::string& what) const {
  if (loss_scale_ == 0 && !(largest <= kFp16Max))
    throw_runtime(
        "dist.compress: fp16: " + what + " holds a gradient of " + std::to_string(largest) +
        " (after 1/ranks), beyond fp16's 65504; use dist.compress: bf16 (float32's range) or none");
}

// Waits for bucket b's collective and leaves its average in the gradients.
void GradientSync::finish_bucket(size_t b) {
  auto& p = pending_[b];
  p->wait();
  const PendingCollective::Timing t = p->timing();
  stats_.allreduce_s += t.done - t.started;
  last_timing_.push_back(t);
  p.reset();
  const GradientBucket& bk = buckets_[b];
  // Reduced in place on the device, or on the host mirror, copied back now.
  if (compress_ == GradientCompression::none) {
    if (!device_) unstage(gradients_, host_gradients_, bk.begin_byte, bk.bytes());
    return;
  }
  // Widen the average back.
  const size_t n = bk.bytes() / sizeof(float);
  const size_t first_code = bk.begin_byte / sizeof(float);
  if (!device_)
    unstage(narrow_codes(), host_codes_, first_code * sizeof(uint16_t), n * sizeof(uint16_t));
  auto* grads = reinterpret_cast<float*>(static_cast<char*>(gradients_) + bk.begin_byte);
  params_.ops().widen(narrow_codes() + first_code,
                      compress_ == GradientCompression::bf16 ? DType::bf16 : DType::f16, grads, n);
  // fp16 summed the loss-scaled gradients: unscale now (bf16 did it when narrowing).
  if (compress_ == GradientCompression::fp16 && started_loss_scale_ > 0)
    params_.ops().scale(1.0 / started_loss_scale_, grads, grads, n);
}

int GradientSync::ranks() const { return comm_.size(); }

// A part's gradient: the average over the ranks holding the same part (each the sum of its
// columns' products over its samples). Loss scaling is undone here as the buckets undo it.
void GradientSync::start_part(size_t i) {
  part_started_[i] = true;
  const ParamSlot& slot = params_.slots()[static_cast<size_t>(parts_[i])];
  Communicator* replicas = slot.spec.shard->replicas();
  void* grad = static_cast<char*>(gradients_) + slot.offset;
  double scale = loss_scale_ > 0 ? 1.0 / loss_scale_ : 1.0;
  if (!replicas || replicas->size() == 1) {
    if (scale != 1.0) params_.ops().scale(scale, grad, grad, slot.count);
    return;
  }
  scale /= replicas->size();
  const std::string what =
      "allreduce of " + slot.name + "'s part (step " + std::to_string(stats_.steps + 1) + ")";
  grad = stage(gradients_, host_gradients_, slot.offset, slot.count * dtype_size(params_.dtype()));
  part_pending_[i] =
      params_.dtype() == DType::f64
          ? replicas->start_allreduce(static_cast<double*>(grad), slot.count, scale, what)
          : replicas->start_allreduce(static_cast<float*>(grad), slot.count,
                                      static_cast<float>(scale), what);
}

void GradientSync::gradient_ready(int slot) {
  if (comm_.size() == 1) return;
  if (const int i = part_of_slot_.at(static_cast<size_t>(slot)); i >= 0)
    return start_part(static_cast<size_t>(i));
  const int b = bucket_of_slot_.at(static_cast<size_t>(slot));
  if (b < 0) return;
  if (--missing_[static_cast<size_t>(b)] == 0) start_bucket(static_cast<size_t>(b));
}

void GradientSync::start_all(void* gradients) {
  if (comm_.size() == 1) return;
  gradients_ = gradients;
  arrival_ = comm_.start_arrival("the gradient lag's exchange (every rank's arrival)");
  for (size_t b = 0; b < buckets_.size(); ++b) start_bucket(b);
  for (size_t i = 0; i < parts_.size(); ++i) start_part(i);
}

void GradientSync::finish() {
  const auto t0 = std::chrono::steady_clock::now();
  if (comm_.size() > 1) {
    if (arrival_) std::exchange(arrival_, nullptr)->wait();
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (!pending_[b]) start_bucket(b);  // in bucket order: the same sequence on every rank
    last_timing_.clear();
    for (size_t b = 0; b < buckets_.size(); ++b) finish_bucket(b);
  }
  finish_parts();
  for (size_t b = 0; b < buckets_.size(); ++b)
    missing_[b] = static_cast<int>(buckets_[b].slots.size());
  gradients_ = params_.grads();
  stats_.finish_wait_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.steps;
}

std::string GradientSync::why_not_recordable() const {
  if (comm_.size() == 1) return "";
  if (!device_) return "the gradient buckets reduced on the device (NCCL), not " + reduction();
  if (compress_ != GradientCompression::none)
    return "dist.compress: none (narrowing a bucket reads its largest value back)";
  if (!parts_.empty())
    return "no divided parameter (dist.spatial: a part's average goes through host copies)";
  return "";
}

void GradientSync::queue_finish() {
  if (comm_.size() == 1) return;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!pending_[b]) start_bucket(b);
  device_->join();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b].reset();  // their wait is finish_recorded()'s
    missing_[b] = static_cast<int>(buckets_[b].slots.size());
  }
}

void GradientSync::finish_recorded() {
  const auto t0 = std::chrono::steady_clock::now();
  if (comm_.size() > 1)
    device_->wait_stream(device_timeout_s_, "the recorded step's gradient exchange (step " +
                                                std::to_string(stats_.steps + 1) + ") on " +
                                                device_->name());
  last_timing_.clear();
  stats_.finish_wait_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.steps;
}

void GradientSync::finish_parts() {
  if (comm_.size() == 1) return;
  for (size_t i = 0; i < parts_.size(); ++i)
    if (!part_started_[i]) start_part(i);  // in ready order: the same sequence everywhere
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (part_pending_[i]) {
      part_pending_[i]->wait();
      const PendingCollective::Timing t = part_pending_[i]->timing();
      stats_.allreduce_s += t.done - t.started;
      part_pending_[i].reset();
      const ParamSlot& slot = params_.slots()[static_cast<size_t>(parts_[i])];
      unstage(gradients_, host_gradients_, slot.offset, slot.count * dtype_size(params_.dtype()));
    }
    part_started_[i] = false;
  }
}

void broadcast_store_layout(Communicator& comm, const ParamStore& params, void* buffer,
                            size_t bytes) {
  if (comm.size() == 1) return;
  // The communicator works on host memory: on a device, through a host copy.
  HostStaging host(params.memory(), buffer, bytes);
  // Parts differ between the ranks of a group: each comes from its replicas' first rank.
  for (const ParamStore::ByteRange& r : params.replicated_ranges(bytes))
    comm.broadcast(host.as<char>() + r.begin, r.end - r.begin, 0);
  for (const ParamSlot& slot : params.slots()) {
    Communicator* replicas = slot.spec.shard ? slot.spec.shard->replicas() : nullptr;
    if (replicas && replicas->size() > 1 && slot.offset < bytes)
      replicas->broadcast(host.as<char>() + slot.offset, slot.count * dtype_size(params.dtype()),
                          0);
  }
  host.commit();
}

namespace {

// `values` <- its sum over `comm`, divided by the ranks.
void average_over(Communicator& comm, DType dtype, char* values, size_t bytes) {
  const std::string what = "model averaging (local SGD)";
  if (dtype == DType::f64) {
    comm.start_allreduce(reinterpret_cast<double*>(values), bytes / sizeof(double),
                         1.0 / comm.size(), what)
        ->wait();
    return;
  }
  CREST_CHECK(dtype == DType::f32, "model averaging needs float32 or float64 parameters");
  comm.start_allreduce(reinterpret_cast<float*>(values), bytes / sizeof(float),
                       1.f / static_cast<float>(comm.size()), what)
      ->wait();
}

}  // namespace

void average_replicated(Communicator& comm, const ParamStore& params, void* buffer, size_t bytes) {
  if (comm.size() == 1) return;
  HostStaging host(params.memory(), buffer, bytes);
  for (const ParamStore::ByteRange& r : params.replicated_ranges(bytes))
    average_over(comm, params.dtype(), host.as<char>() + r.begin, r.end - r.begin);
  host.commit();
}

void average_store_layout(Communicator& comm, const ParamStore& params, void* buffer,
                          size_t bytes) {
  if (comm.size() == 1) return;
  average_replicated(comm, params, buffer, bytes);
  HostStaging host(params.memory(), buffer, bytes);
  for (const ParamSlot& slot : params.slots()) {
    Communicator* replicas = slot.spec.shard ? slot.spec.shard->replicas() : nullptr;
    if (replicas && replicas->size() > 1 && slot.offset < bytes)
      average_over(*replicas, params.dtype(), host.as<char>() + slot.offset,
                   slot.count * dtype_size(params.dtype()));
  }
  host.commit();
}

}  // namespace crest
