// The CUDA backend object (docs/cuda.md): device memory, one stream, and cuDNN, cuBLAS and
// CUDA kernels behind the Backend interface. It computes in float32, and under mixed precision
// in bf16 (compute capability 8.0 and up) or fp16, on plain or channels-last layouts (a network
// fed the data files' channels-last batches computes channels-last; context.hpp). The plugin's
// entry point (plugin.hpp) hands the loader the factory and the question whether this machine can
// run it.
#include <mutex>

#include "crest/backends/kernels.hpp"
#include "crest/core/units.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_memory.hpp"
#include "cuda/nccl_collectives.hpp"
#include "cuda/plugin.hpp"
#include "cuda/vector_ops.hpp"

namespace crest::cuda {
namespace {

bool is_dense(const MemFormat& f) {
  return f.layout == Layout::plain || f.layout == Layout::channels_last;
}
bool is_computed(DType t) { return t == DType::f32 || is_half(t); }

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::shared_ptr<Context> context)
      : context_(std::move(context)), memory_(context_), stream_(context_) {}

  std::string name() const override { return "cuda"; }
  const std::shared_ptr<Context>& context() const { return context_; }
  Device device() const override { return Device::cuda; }
  bool supports(DType dtype) const override { return static_cast<bool>(supports_dtype(dtype)); }
  // bf16 needs the tensor cores of compute capability 8.0 (Ampere) and up.
  Support supports_dtype(DType dtype) const override {
    const cudaDeviceProp& p = context_->properties;
    if (dtype == DType::bf16 && p.major < 8)
      return Support::no("bf16 needs a GPU of compute capability 8.0 or later; " +
                         std::string(p.name) + " has " + std::to_string(p.major) + "." +
                         std::to_string(p.minor));
    if (is_computed(dtype)) return Support::yes();
    return Support::no(dtype_name(dtype) + " tensors are not supported by the cuda backend");
  }
  bool fuses(const EltwiseDesc& /*e*/) const override { return false; }
  MemoryResource& memory() const override { return memory_; }
  Stream& stream() const override { return stream_; }
  // The kernels are asynchronous on the device; host threads only issue them.
  int set_threads(int /*threads*/) override { return 1; }
  std::string instruction_sets() const override {
    const cudaDeviceProp& p = context_->properties;
    return std::string(p.name) + " sm_" + std::to_string(p.major) + std::to_string(p.minor);
  }

  // What the device has free now (the context, other processes on it and earlier sessions
  // taken), so the compiler's check refuses a model that cannot fit before allocating it.
  MemoryCapacity memory_capacity() const override {
    size_t free = 0, total = 0;
    CREST_CUDA(cudaMemGetInfo(&free, &total));
    const auto bytes = [](size_t b) { return human_bytes(static_cast<double>(b)); };
    return {free, "cuda device " + std::to_string(context_->device) + " (" +
                      context_->properties.name + ": " + bytes(free) + " of " + bytes(total) +
                      " free; crest.max_memory_gb sets another limit)"};
  }

  PeakRate peak(DType dtype, int64_t n, int iters) override {
    return gemm_peak(*context_, dtype, n, iters);
  }

  // The convolutions made from now on keep their measured cuDNN algorithms in the run's record
  // (and under crest.autotune in the machine's cache), and a resumed run takes them from there.
  void set_layout_tuning(const LayoutTuning& tuning) override {
    context_->tuned = std::make_shared<TunedChoices>(tuning, machine_signature(*context_));
  }

  Support supports_device_collectives() const override { return nccl_available(); }
  std::unique_ptr<DeviceCollectives> device_collectives(
      int rank, int ranks,
      const std::function<void(void* data, size_t bytes)>& share_from_first) override {
    return make_nccl_collectives(context_, rank, ranks, share_from_first);
  }

  using Backend::supports;
  Support supports(const ConvDesc& d) const override {
    if (Support s = Backend::supports(d); !s) return s;
    return conv_support(d);
  }
  Support supports(const PoolDesc& d) const override {
    if (Support s = Backend::supports(d); !s) return s;
    return pool_support(d);
  }
  Support supports(const EltwiseDesc& d, const MemFormat& f) const override {
    if (f.layout == Layout::blocked)
      return Support::no("the cuda backend cannot read blocked format " + f.str());
    return Backend::supports(d, f);
  }
  Support supports(const MemFormat& from, const MemFormat& to) const override {
    if (Support s = Backend::supports(from, to); !s) return s;
    const bool same_type = from.dtype == to.dtype;
    if (!is_dense(from) || !is_dense(to) || from.shape != to.shape ||
        !(same_type || (is_computed(from.dtype) && is_computed(to.dtype))))
      return Support::no(
          "the cuda backend reorders only between plain and channels-last formats of one shape, "
          "of one type or between float32, bf16 and fp16, not " +
          from.str() + " to " + to.str());
    return Support::yes();
  }
  Support supports(const std::vector<MemFormat>& srcs) const override {
    if (Support s = Backend::supports(srcs); !s) return s;
    return rows_concatenable(srcs, name());
  }

 protected:
  // A kernel computes in its producer's layout where it can (CREST_CUDA_LAYOUT: context.hpp).
  std::unique_ptr<ConvKernel> create_conv(const ConvDesc& d, const MemFormat& hint) override {
    return make_conv(context_, d, hint);
  }
  std::unique_ptr<PoolKernel> create_pool(const PoolDesc& d, const MemFormat& hint) override {
    return make_pool(context_, d, hint);
  }
  std::unique_ptr<EltwiseKernel> create_eltwise(const EltwiseDesc& d, const MemFormat& f) override {
    return make_eltwise(context_, d, f);
  }
  std::unique_ptr<DenseKernel> create_dense(const DenseDesc& d) override {
    return make_dense(context_, d);
  }
  std::unique_ptr<ReorderKernel> create_reorder(const MemFormat& from,
                                                const MemFormat& to) override {
    return make_reorder(context_, from, to);
  }
  std::unique_ptr<ConcatKernel> create_concat(const std::vector<MemFormat>& srcs) override {
    return make_concat(context_, srcs);
  }
  std::unique_ptr<VectorOps> create_vector_ops(DType dtype) override {
    return make_vector_ops(dtype, context_->stream);
  }

 private:
  std::shared_ptr<Context> context_;
  mutable DeviceMemory memory_;
  mutable DeviceStream stream_;
};

// Asked once per process: the answer does not change while it runs, and a start-up that asks
// for the default backend should not probe the driver twice.
Support cuda_available() {
  static std::once_flag once;
  static Support answer;
  std::call_once(once, [] { answer = device_available(); });
  return answer;
}

std::unique_ptr<Backend> make_cuda_backend() {
  return std::make_unique<CudaBackend>(open_context());
}

}  // namespace

std::shared_ptr<Context> context_of(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  CREST_CHECK(cuda != nullptr, "a cuda kernel was asked of backend '" + backend.name() + "'");
  return cuda->context();
}

}  // namespace crest::cuda

const crest::cuda::PluginEntry* crest_cuda_plugin_entry() {
  static const crest::cuda::PluginEntry entry{crest::cuda::cuda_available,
                                              crest::cuda::make_cuda_backend};
  return &entry;
}
