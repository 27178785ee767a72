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
#include "onednn/onednn_backend.hpp"
#include "onednn/pool.hpp"
#include "onednn/reorder.hpp"
#include "onednn/vector_ops.hpp"

namespace crest {
namespace {

class OneDnnBackend final : public Backend {
 public:
  OneDnnBackend() : ctx_(std::make_shared<onednn::Context>()) {}

  std::string name() const override { return "onednn"; }
  Device device() const override { return Device::cpu; }
  // bf16 needs its own accumulation and tolerance story; until then, f32 only.
  bool supports(DType dtype) const override { return dtype == DType::f32; }
  bool fuses(const EltwiseDesc& e) const override { return onednn::eltwise_supported(e); }

  std::unique_ptr<ConvKernel> conv(const ConvDesc& d, const MemFormat& src_hint) override {
    require(d.dtype, "convolution");
    return onednn::make_conv(ctx_, d, src_hint);
  }
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d, const MemFormat& src_hint) override {
    require(d.dtype, "pooling");
    return onednn::make_pool(ctx_, d, src_hint);
  }
  std::unique_ptr<EltwiseKernel> eltwise(const EltwiseDesc& d, const MemFormat& f) override {
    require(f.dtype, "eltwise");
    return onednn::make_eltwise(ctx_, d, f);
  }
  std::unique_ptr<DenseKernel> dense(const DenseDesc& d) override {
    require(d.dtype, "dense");
    return onednn::make_dense(ctx_, d);
  }
  std::unique_ptr<ReorderKernel> reorder(const MemFormat& from, const MemFormat& to) override {
    require(from.dtype, "reorder");
    return onednn::make_reorder(ctx_, from, to);
  }
  std::unique_ptr<ConcatKernel> concat(const std::vector<MemFormat>& srcs) override {
    for (const MemFormat& f : srcs) require(f.dtype, "concat");
    return onednn::make_concat(ctx_, srcs);
  }
  std::unique_ptr<VectorOps> vector_ops(DType dtype) override {
    require(dtype, "vector ops");
    return onednn::make_vector_ops(dtype);
  }

  // oneDNN (OpenMP runtime) and the vector ops both run on the OpenMP thread team.
  int set_threads(int threads) override {
    if (threads < 1) throw_usage("thread count must be >= 1, got " + std::to_string(threads));
    omp_set_num_threads(threads);
    return threads;
  }

  PeakRate peak(DType dtype, int64_t n, int iters) override {
    const GemmPeak g = measure_gemm_peak(dtype, n, n, n, iters);
    return {g.supported, g.gflops, g.implementation};
  }
  // Its memory is host memory: the reference backend's registered kernels run on it.
  std::string kernel_fallback() const override { return "reference"; }

 private:
  void require(DType t, const char* what) const {
    if (!supports(t))
      throw_usage(std::string(what) + ": the onednn backend does not support " + dtype_name(t) +
                  " (f32 only; use the reference backend for f64)");
  }

  onednn::ContextPtr ctx_;
};

}  // namespace

std::unique_ptr<Backend> make_onednn_backend() { return std::make_unique<OneDnnBackend>(); }

CREST_REGISTER_BACKEND(onednn, "onednn", make_onednn_backend);

}  // namespace crest
