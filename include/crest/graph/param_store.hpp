// Parameters, their gradients and (in the optimizer) their state live in flat buffers, one
// 256-byte-aligned slice per tensor, so gradient buckets, norms and checkpoints are slices of
// three buffers. Trainable slices come first, then a small sideband (see sideband()), then
// non-trained state (running statistics).
// The buffers live in the backend's memory resource; ops() are the backend's element-wise
// operations on them, so code above the backend (gradient compression) is written once.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/tensor.hpp"
#include "crest/graph/layer.hpp"

namespace crest {

struct ParamSlot {
  std::string name;  // "<layer>.<param>", e.g. "conv1.weight"
  Shape shape;
  size_t offset = 0;  // bytes into the flat buffers
  size_t count = 0;   // elements
  ParamSpec spec;
};

class ParamStore {
 public:
  ParamStore() = default;
  // Buffers from backend.memory(), zeroed; ops() from backend.vector_ops(dtype). `allocate`
  // false: the layout alone (slots, offsets, bytes()), no buffers (values() and grads() are
  // null): a pipeline's whole-model plan on the ranks that hold one stage of it. `gradients`
  // false: the values without gradients (grads() null): the whole model a pipeline's rank 0
  // keeps for checkpoints, which never computes.
  ParamStore(std::vector<ParamSlot> slots, DType dtype, Backend& backend, bool allocate = true,
             bool gradients = true);

  // A store of `owner`'s layout whose values and gradients are `owner`'s buffers, not copies:
  // executors compiled from one graph that take turns on one set of parameters (a pipeline
  // stage's activation sets) read and write the same memory. The buffers live as long as either
  // store. ops() from `backend`, which must be the owner's.
  static ParamStore sharing_buffers_of(const ParamStore& owner, Backend& backend);
  ParamStore(ParamStore&&) noexcept = default;
  ParamStore& operator=(ParamStore&&) noexcept = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  DType dtype() const { return dtype_; }
  const std::vector<ParamSlot>& slots() const { return slots_; }
  bool allocated() const { return values() != nullptr; }
  bool has_gradients() const { return grads() != nullptr; }
  size_t bytes() const { return bytes_; }  // of each buffer, allocated or not
  size_t trainable_bytes() const { return trainable_bytes_; }
  size_t trainable_count_padded() const { return trainable_bytes_ / dtype_size(dtype_); }
  int64_t parameter_count() const;  // trainable elements, without padding (whole parameters)

  // Parameters divided among a group (ParamSpec::shard): whether any slot is one; the sum of
  // squares of all trainable gradients, a divided slot's parts summed over its group (so every
  // rank gets the whole model's: a collective when divided() is true); and the byte ranges of
  // [0, end) that hold no divided slot, which are the same on every rank of the job (gradient
  // averaging and broadcasts over all ranks cover these; each part goes to its replicas).
  bool divided() const;
  double grad_sum_squares() const;
  // The same into out[0] (the backend's memory), read later: only where divided() is false.
  void grad_sum_squares_into(double* out) const;
  struct ByteRange {
    size_t begin = 0, end = 0;
  };
  std::vector<ByteRange> replicated_ranges(size_t end) const;
  // parts[i]: a value of the i-th divided trainable slot (slot order), summed over its group in
  // place; returns the sum of them all.
  double sum_over_groups(std::vector<double>& parts) const;

  // Where values() and grads() live: host code reads them directly only when memory().is_host().
  MemoryResource& memory() const { return *memory_; }
  // The backend's element-wise operations on these buffers (this store's dtype).
  VectorOps& ops() const;
  void* values() const { return values_ ? values_->data() : nullptr; }
  void* grads() const { return grads_ ? grads_->data() : nullptr; }
  // The gradient buffer's sideband: kSidebandBytes right after the trainable gradients
  // (grads() + trainable_bytes()), part of no parameter. The gradient exchange sums it with the
  // bucket that ends there, so per-step facts every rank must agree on (a stop request, a
  // non-finite loss) cross ranks without a collective of their own. Zero until written.
  static constexpr size_t kSidebandBytes = 256;
  void* sideband() const { return static_cast<char*>(grads()) + trainable_bytes_; }
  TensorView value(size_t slot) const;
  TensorView grad(size_t slot) const;
  // Index of the slot named `name`, or -1.
  int find(const std::string& name) const;

  // Deterministic initialisation: each slot's generator is seeded from (seed, slot name), so
  // adding a layer does not change the others' initial values. Computed on the host and copied
  // into the store's memory (in place on host memory).
  void initialize(uint64_t seed);

 private:
  void fill(void* w, size_t count, const ParamSlot& s, uint64_t seed) const;

  std::vector<ParamSlot> slots_;
  DType dtype_ = DType::f32;
  // Shared with the stores made by sharing_buffers_of (never copied).
  std::shared_ptr<Buffer> values_, grads_;
  MemoryResource* memory_ = &host_memory();
  std::unique_ptr<VectorOps> ops_;
  size_t bytes_ = 0, trainable_bytes_ = 0;
};

}  // namespace crest
