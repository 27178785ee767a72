// A backend for tests that runs the reference kernels on a memory resource that counts what it
// is asked: allocations (and which pointers it handed out), copies each way and stream
// synchronisations. With pretend_device it answers is_host() == false, so every caller outside
// the backend must take the explicit-copy path (HostStaging) although the memory is host memory
// underneath, and the results can still be compared bit for bit with the reference backend.
#pragma once
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "counting_vector_ops.hpp"
#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"

namespace crest::test {

// Host memory that counts its allocations: a pretend device's staging memory.
class CountingHostMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes, size_t alignment) override {
    ++allocations;
    return host_memory().allocate(bytes, alignment);
  }
  void deallocate(void* p, size_t bytes) override { host_memory().deallocate(p, bytes); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void memset(void* dst, int value, size_t bytes) override { std::memset(dst, value, bytes); }
  bool is_host() const override { return true; }

  int allocations = 0;
};

// A pretend device's copy that has not run yet: the bytes move only when the stream is ordered
// after it or the host waits for it (or it is dropped), so a caller that reads the destination
// without either sees the old bytes, as it could on a GPU.
class DeferredCopy final : public PendingCopy {
 public:
  DeferredCopy(void* dst, const void* src, size_t bytes) { restart(dst, src, bytes); }
  DeferredCopy(const DeferredCopy&) = delete;
  DeferredCopy& operator=(const DeferredCopy&) = delete;
  ~DeferredCopy() override { run(); }
  void wait() override { run(); }
  void order_before_stream() override { run(); }
  // Another copy in this one's place (reuse): the earlier one has been waited for.
  void restart(void* dst, const void* src, size_t bytes) {
    dst_ = dst;
    src_ = src;
    bytes_ = bytes;
  }

 private:
  void run() {
    if (bytes_ > 0) std::memcpy(dst_, src_, bytes_);
    bytes_ = 0;
  }
  void* dst_ = nullptr;
  const void* src_ = nullptr;
  size_t bytes_ = 0;
};

class CountingMemory final : public MemoryResource {
 public:
  explicit CountingMemory(bool pretend_device) : pretend_device_(pretend_device) {}

  void* allocate(size_t bytes, size_t alignment) override {
    void* p = host_memory().allocate(bytes, alignment);
    ++allocations;
    if (p) live_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  void deallocate(void* p, size_t bytes) override {
    live_.erase(static_cast<const char*>(p));
    host_memory().deallocate(p, bytes);
  }
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override {
    ++copies_to_device;
    std::memcpy(dst, host_src, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    ++copies_to_host;
    std::memcpy(host_dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void memset(void* dst, int value, size_t bytes) override { std::memset(dst, value, bytes); }
  // On the pretend device a queued write whose values travel with it: done at once, counted.
  void write_values(void* dst, const void* values, size_t bytes) override {
    if (bytes > kMaxWrittenValues) return MemoryResource::write_values(dst, values, bytes);
    if (pretend_device_) ++values_written;
    std::memcpy(dst, values, bytes);
  }
  bool is_host() const override { return !pretend_device_; }
  MemoryResource& staging_memory() override { return staging; }
  std::unique_ptr<PendingCopy> start_copy_to_device(void* dst, const void* host_src, size_t bytes,
                                                    std::unique_ptr<PendingCopy> reuse) override {
    if (!pretend_device_)
      return MemoryResource::start_copy_to_device(dst, host_src, bytes, std::move(reuse));
    ++copies_started;
    if (auto* earlier = dynamic_cast<DeferredCopy*>(reuse.get())) {
      earlier->restart(dst, host_src, bytes);
      return reuse;
    }
    ++copy_objects_made;
    return std::make_unique<DeferredCopy>(dst, host_src, bytes);
  }

  // The bytes of the blocks handed out and not taken back.
  size_t live_bytes() const {
    size_t n = 0;
    for (const auto& block : live_) n += block.second;
    return n;
  }

  // Whether p lies inside a block this resource handed out and has not taken back.
  bool owns(const void* p) const {
    const char* c = static_cast<const char*>(p);
    auto it = live_.upper_bound(c);
    if (it == live_.begin()) return false;
    --it;
    return c < it->first + it->second;
  }

  int allocations = 0, copies_to_device = 0, copies_to_host = 0;
  int values_written = 0;      // write_values on the pretend device
  int copies_started = 0;      // start_copy_to_device on the pretend device
  int copy_objects_made = 0;   // of them, those that did not reuse an earlier copy
  CountingHostMemory staging;  // what staging_memory() hands out

 private:
  bool pretend_device_;
  std::map<const char*, size_t> live_;  // block start -> bytes
};

// A pretend device's recorded work (Stream::end_capture): it ran as it was queued (the pretend
// device runs everything on the host at once), so a launch only counts.
class CountingGraph final : public StreamGraph {
 public:
  explicit CountingGraph(int* launches) : launches_(launches) {}
  void launch() override { ++*launches_; }

 private:
  int* launches_;
};

// With `records` (a pretend device) it takes recordings as a GPU's stream does, and counts what a
// GPU could not do inside one: every wait for the device (a synchronisation, a value handed back
// by the VectorOps, a copy either way, which the cuda backend completes before returning) between
// begin_capture and end_capture.
class CountingStream final : public Stream {
 public:
  CountingStream(const int* value_reads, const CountingMemory* memory, bool records)
      : value_reads_(value_reads), memory_(memory), records_(records) {}
  void synchronize() override { ++synchronizations; }
  bool captures() const override { return records_; }
  void begin_capture() override {
    if (!records_ || recording) throw_usage("the pretend device is not ready to record");
    recording = true;
    ++recordings_begun;
    waits_at_begin_ = waits();
  }
  void end_capture(std::unique_ptr<StreamGraph>& graph) override {
    if (!recording) throw_usage("end_capture without begin_capture");
    recording = false;
    ++recordings_ended;
    waits_while_recording += waits() - waits_at_begin_;
    if (!graph) {
      graph = std::make_unique<CountingGraph>(&launches);
      ++graphs_made;
    }
  }

  int synchronizations = 0;
  bool recording = false;
  int recordings_begun = 0, recordings_ended = 0, graphs_made = 0, launches = 0;
  int waits_while_recording = 0;

 private:
  int waits() const {
    return synchronizations + *value_reads_ + memory_->copies_to_host + memory_->copies_to_device;
  }
  const int* value_reads_;
  const CountingMemory* memory_;
  bool records_;
  int waits_at_begin_ = 0;
};

// A convolution kernel that names another implementation than its own (the test's stand-in for
// oneDNN's reference code).
class NamedConvKernel final : public ConvKernel {
 public:
  NamedConvKernel(std::unique_ptr<ConvKernel> inner, std::string name)
      : inner_(std::move(inner)), name_(std::move(name)) {}
  MemFormat src_format() const override { return inner_->src_format(); }
  MemFormat dst_format() const override { return inner_->dst_format(); }
  size_t scratch_bytes() const override { return inner_->scratch_bytes(); }
  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    inner_->forward(src, weights, bias, dst, scratch);
  }
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    inner_->backward_data(diff_dst, weights, diff_src, scratch);
  }
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    inner_->backward_weights(src, diff_dst, diff_weights, diff_bias, scratch);
  }
  std::string implementation() const override { return name_; }

 private:
  std::unique_ptr<ConvKernel> inner_;
  std::string name_;
};

// The reference backend's kernels on a CountingMemory. refuse_conv: supports(ConvDesc) says no,
// as a backend without convolutions would. names_reference_code: the convolutions whose
// kernels say they run "ref:any", as oneDNN's reference code does. convs_made: what was asked.
class CountingBackend final : public Backend {
 public:
  std::function<bool(const ConvDesc&)> names_reference_code;
  std::vector<ConvDesc> convs_made;  // every convolution kernel asked for, in order

  explicit CountingBackend(bool pretend_device = false, bool refuse_conv = false)
      : inner_(make_backend("reference")),
        memory_(pretend_device),
        stream_(&value_reads, &memory_, pretend_device),
        refuse_conv_(refuse_conv) {}

  std::string name() const override { return "counting"; }
  Device device() const override { return Device::cpu; }
  bool supports(DType dtype) const override { return inner_->supports(dtype); }
  bool fuses(const EltwiseDesc& e) const override { return inner_->fuses(e); }
  CountingMemory& memory() const override { return memory_; }
  CountingStream& stream() const override { return stream_; }
  int set_threads(int /*threads*/) override { return 1; }
  std::string kernel_fallback() const override { return "reference"; }
  MemoryCapacity memory_capacity() const override { return capacity; }
  MemoryCapacity capacity;  // what memory_capacity() says: none unless a test sets it
  // VectorOps calls that returned a value computed from the memory (CountingVectorOps): on a
  // GPU each is a wait for the device.
  int value_reads = 0;
  // The dropout kernels queued through its VectorOps (CountingVectorOps).
  DropoutCalls dropouts;
  // The optimizer update kernels queued through it (CountingVectorOps).
  UpdateCalls updates;

  using Backend::supports;
  Support supports(const ConvDesc& d) const override {
    if (refuse_conv_) return Support::no("this test backend runs no convolutions");
    return inner_->supports(d);
  }

 protected:
  std::unique_ptr<ConvKernel> create_conv(const ConvDesc& d, const MemFormat& hint) override {
    convs_made.push_back(d);
    if (names_reference_code && names_reference_code(d))
      return std::make_unique<NamedConvKernel>(inner_->conv(d, hint), "conv:any+ref:any");
    return inner_->conv(d, hint);
  }
  std::unique_ptr<PoolKernel> create_pool(const PoolDesc& d, const MemFormat& hint) override {
    return inner_->pool(d, hint);
  }
  std::unique_ptr<EltwiseKernel> create_eltwise(const EltwiseDesc& d, const MemFormat& f) override {
    return inner_->eltwise(d, f);
  }
  std::unique_ptr<DenseKernel> create_dense(const DenseDesc& d) override {
    return inner_->dense(d);
  }
  std::unique_ptr<ReorderKernel> create_reorder(const MemFormat& from,
                                                const MemFormat& to) override {
    return inner_->reorder(from, to);
  }
  std::unique_ptr<ConcatKernel> create_concat(const std::vector<MemFormat>& srcs) override {
    return inner_->concat(srcs);
  }
  std::unique_ptr<VectorOps> create_vector_ops(DType dtype) override {
    return std::make_unique<CountingVectorOps>(inner_->vector_ops(dtype), &value_reads, &dropouts,
                                               &updates);
  }

 private:
  std::unique_ptr<Backend> inner_;
  mutable CountingMemory memory_;
  mutable CountingStream stream_;
  bool refuse_conv_;
};

}  // namespace crest::test
