// The reference backend object: routes each kernel request to its family's factory.
#include "reference/reference_backend.hpp"

#include "reference/reference_kernels.hpp"

namespace crest {
namespace {

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }
  Device device() const override { return Device::cpu; }
  // f32 and f64; bf16 and fp16 emulated through float32 (half_emulation.cpp) so tests can check
  // mixed precision on any machine.
  bool supports(DType dtype) const override {
    return dtype == DType::f32 || dtype == DType::f64 || is_half(dtype);
  }
  // The reference conv applies any activation after the bias itself.
  bool fuses(const EltwiseDesc& e) const override { return e.kind != EltwiseKind::none; }

  MemoryResource& memory() const override { return host_memory(); }
  // Every kernel finishes before it returns.
  Stream& stream() const override { return stream_; }

  using Backend::supports;
  // Plain loops read plain and channels-last memory only; a blocked format (oneDNN's) is opaque.
  Support supports(const EltwiseDesc& d, const MemFormat& f) const override {
    if (f.layout == Layout::blocked)
      return Support::no("the reference backend cannot read blocked format " + f.str());
    return Backend::supports(d, f);
  }
  // Concatenation copies rows of one layout: the concat layer reorders a mix into one.
  Support supports(const std::vector<MemFormat>& srcs) const override {
    if (Support s = Backend::supports(srcs); !s) return s;
    return rows_concatenable(srcs, name());
  }

 protected:
  // The hints are ignored: the reference kernels always work in plain layout and the compile
  // step inserts a reorder when the producer delivers something else.
  std::unique_ptr<ConvKernel> create_conv(const ConvDesc& d,
                                          const MemFormat& /*src_hint*/) override {
    return is_half(d.dtype) ? reference::make_half_conv(d) : reference::make_conv(d);
  }
  std::unique_ptr<PoolKernel> create_pool(const PoolDesc& d,
                                          const MemFormat& /*src_hint*/) override {
    return is_half(d.dtype) ? reference::make_half_pool(d) : reference::make_pool(d);
  }
  std::unique_ptr<EltwiseKernel> create_eltwise(const EltwiseDesc& d, const MemFormat& f) override {
    return is_half(f.dtype) ? reference::make_half_eltwise(d, f) : reference::make_eltwise(d, f);
  }
  std::unique_ptr<DenseKernel> create_dense(const DenseDesc& d) override {
    return is_half(d.dtype) ? reference::make_half_dense(d) : reference::make_dense(d);
  }
  std::unique_ptr<ReorderKernel> create_reorder(const MemFormat& from,
                                                const MemFormat& to) override {
    return reference::make_reorder(from, to);
  }
  std::unique_ptr<ConcatKernel> create_concat(const std::vector<MemFormat>& srcs) override {
    return reference::make_concat(srcs);
  }
  std::unique_ptr<VectorOps> create_vector_ops(DType dtype) override {
    return reference::make_vector_ops(dtype);
  }

 public:
  // Single-threaded by design: the oracle's results must not depend on a thread count.
  int set_threads(int /*threads*/) override { return 1; }

 private:
  mutable HostStream stream_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

CREST_REGISTER_BACKEND(reference, "reference", make_reference_backend, 0);

}  // namespace crest
