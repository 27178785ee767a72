// The oneDNN backend object: one engine and stream for all its kernels, and the routing of each
// kernel request to its family's file.
#include <omp.h>

#include "crest/core/error.hpp"
#include "onednn/concat.hpp"
#include "onednn/context.hpp"
#include "onednn/conv.hpp"
#include "onednn/dense.hpp"
#include "onednn/eltwise.hpp"
#include "onednn/gemm_peak.hpp"
#include "onednn/layout_tuner.hpp"
#include "onednn/onednn_backend.hpp"
#include "onednn/pool.hpp"
#include "onednn/reorder.hpp"
#include "onednn/vector_ops.hpp"

namespace crest {
namespace {

class OneDnnBackend final : public Backend {
 public:
  OneDnnBackend() {
    onednn::apply_isa_cap();
    ctx_ = std::make_shared<onednn::Context>();
  }

  std::string name() const override { return "onednn"; }
  Device device() const override { return Device::cpu; }
  // f32, and the 16-bit floats of mixed precision where this CPU has their instructions (f64
  // runs on the reference backend).
  bool supports(DType dtype) const override { return static_cast<bool>(supports_dtype(dtype)); }
  Support supports_dtype(DType dtype) const override { return onednn::dtype_support(dtype); }
  bool fuses(const EltwiseDesc& e) const override { return onednn::eltwise_supported(e); }
  std::string instruction_sets() const override { return onednn::instruction_sets(); }

  // oneDNN's CPU engine works on plain host pointers, and every primitive finishes in execute().
  MemoryResource& memory() const override { return host_memory(); }
  Stream& stream() const override { return stream_; }

  using Backend::supports;
  // Activations whose backward oneDNN computes from dst (none: the identity, a linear map).
  Support supports(const EltwiseDesc& d, const MemFormat& f) const override {
    if (d.kind != EltwiseKind::none && !onednn::eltwise_supported(d))
      return Support::no(
          "oneDNN computes this activation's backward from its output only for "
          "relu with slope >= 0, leaky_relu with slope > 0, tanh, sigmoid, linear");
    return Backend::supports(d, f);
  }

 protected:
  std::unique_ptr<ConvKernel> create_conv(const ConvDesc& d, const MemFormat& src_hint) override {
    return onednn::make_conv(ctx_, d, src_hint, tuner_.get());
  }
  std::unique_ptr<PoolKernel> create_pool(const PoolDesc& d, const MemFormat& src_hint) override {
    return onednn::make_pool(ctx_, d, src_hint);
  }
  std::unique_ptr<EltwiseKernel> create_eltwise(const EltwiseDesc& d, const MemFormat& f) override {
    return onednn::make_eltwise(ctx_, d, f);
  }
  std::unique_ptr<DenseKernel> create_dense(const DenseDesc& d) override {
    return onednn::make_dense(ctx_, d);
  }
  std::unique_ptr<ReorderKernel> create_reorder(const MemFormat& from,
                                                const MemFormat& to) override {
    return onednn::make_reorder(ctx_, from, to);
  }
  std::unique_ptr<ConcatKernel> create_concat(const std::vector<MemFormat>& srcs) override {
    return onednn::make_concat(ctx_, srcs);
  }
  std::unique_ptr<VectorOps> create_vector_ops(DType dtype) override {
    return onednn::make_vector_ops(dtype);
  }

 public:
  // oneDNN (OpenMP runtime) and the vector ops both run on the OpenMP thread team.
  int set_threads(int threads) override {
    if (threads < 1) throw_usage("thread count must be >= 1, got " + std::to_string(threads));
    omp_set_num_threads(threads);
    return threads;
  }

  // A fresh tuner per setting: its record file is the run's, its timer the steady clock.
  void set_layout_tuning(const LayoutTuning& tuning) override {
    tuner_ = std::make_unique<onednn::LayoutTuner>(tuning, onednn::make_clock_timer());
  }

  PeakRate peak(DType dtype, int64_t n, int iters) override {
    const GemmPeak g = measure_gemm_peak(dtype, n, n, n, iters);
    return {g.supported, g.gflops, g.implementation};
  }
  // Its memory is host memory: the reference backend's registered kernels run on it.
  std::string kernel_fallback() const override { return "reference"; }

  const onednn::ContextPtr& context() const { return ctx_; }

 private:
  onednn::ContextPtr ctx_;
  mutable HostStream stream_;
  std::unique_ptr<onednn::LayoutTuner> tuner_;  // null: the fixed layout rule
};

}  // namespace

std::unique_ptr<Backend> make_onednn_backend() { return std::make_unique<OneDnnBackend>(); }

onednn::ContextPtr onednn::backend_context(Backend& backend) {
  const auto* b = dynamic_cast<const OneDnnBackend*>(&backend);
  if (b == nullptr)
    throw_usage("a oneDNN kernel was asked for on backend '" + backend.name() + "'");
  return b->context();
}

CREST_REGISTER_BACKEND(onednn, "onednn", make_onednn_backend, 10);

}  // namespace crest
