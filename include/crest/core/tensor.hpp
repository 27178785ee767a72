// Tensor descriptors and non-owning views. Activation memory belongs to the executor's planned
// arena and parameters to flat buffers; a TensorView only points into them.
#pragma once
#include <cstddef>
#include <string>

#include "crest/core/dtype.hpp"
#include "crest/core/memory_resource.hpp"
#include "crest/core/shape.hpp"

namespace crest {

enum class Device : uint8_t { cpu, cuda };

// How a tensor's elements are laid out in memory. Logical dimensions are always N, C, spatial...
// (channels first); the layout says how they are stored.
//  plain          row-major in logical order (NCDHW)
//  channels_last  N, spatial..., C (the order of the CosmoFlow/DeepCAM files)
//  blocked        backend-specific (e.g. oneDNN nCdhw16c); only that backend reads it
enum class Layout : uint8_t { plain, channels_last, blocked };

const char* device_name(Device d);
const char* layout_name(Layout l);

struct TensorDesc {
  Shape shape;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  Layout layout = Layout::plain;
};

class TensorView {
 public:
  TensorView() = default;
  TensorView(void* data, TensorDesc desc) : data_(data), desc_(desc) {}

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  const TensorDesc& desc() const { return desc_; }
  const Shape& shape() const { return desc_.shape; }
  DType dtype() const { return desc_.dtype; }
  int64_t numel() const { return desc_.shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(desc_.dtype); }

 private:
  void* data_ = nullptr;
  TensorDesc desc_;
};

// Owning, aligned, zero-initialised buffer for the few places that own memory (arena, flat
// parameter buffers, test fixtures). Never allocated inside a training step. Model memory comes
// from the backend's MemoryResource (backend.memory()); the host default is for buffers that are
// host-side by nature (loader batches, staging copies).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes, size_t alignment = 256, MemoryResource& memory = host_memory());
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The resource the memory came from: only host code may touch data() when memory().is_host().
  MemoryResource& memory() const { return *memory_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryResource* memory_ = &host_memory();
};

// A Buffer for `what` ("the model's parameters"): where the memory cannot hold it (a GPU out of
// memory, the host refusing), a crest::Error (input) that names it and its size before the
// resource's reason, so the user learns which part of the model did not fit.
Buffer named_buffer(const std::string& what, size_t bytes, MemoryResource& memory,
                    size_t alignment = 256);

inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace crest
