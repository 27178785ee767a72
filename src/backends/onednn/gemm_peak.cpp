#include "onednn/gemm_peak.hpp"

#include <chrono>
#include <oneapi/dnnl/dnnl.hpp>

#include "crest/core/error.hpp"

namespace crest {

GemmPeak measure_gemm_peak(DType dtype, int64_t m, int64_t n, int64_t k, int iters) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  GemmPeak out;
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    throw_usage("bench peak supports f32, bf16 and f16");
  const dt in_type = dtype == DType::bf16 ? dt::bf16 : dtype == DType::f16 ? dt::f16 : dt::f32;
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    dnnl::memory::desc a({m, k}, in_type, tag::ab), b({k, n}, in_type, tag::any),
        c({m, n}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(eng, a, b, c);
    } catch (const dnnl::error& e) {
      // oneDNN 3.2 has no matmul at all for bf16 or f16 below AVX-512 (AVX2 CPUs such as Zen 3):
      // the same answer as a reference-only fallback, not a failure.
      if (e.status != dnnl_unimplemented) throw;
      out.implementation = "none: oneDNN has no " + dtype_name(dtype) + " matmul on this CPU";
      return out;
    }
    out.implementation = pd.impl_info_str();
    // oneDNN falls back to reference loops where the ISA lacks the type: not a peak.
    if (out.implementation.find("ref") != std::string::npos) return out;
    dnnl::memory A(pd.src_desc(), eng), B(pd.weights_desc(), eng), C(pd.dst_desc(), eng);
    // Zero-filled inputs would be as fast as any other data; fill with small values anyway so
    // denormal handling cannot flatter the figure.
    auto fill = [](dnnl::memory& mem, dt t) {
      const size_t bytes = mem.get_desc().get_size();
      auto* p = static_cast<unsigned char*>(mem.get_data_handle());
      if (t == dt::f32) {
        auto* f = reinterpret_cast<float*>(p);
        for (size_t i = 0; i < bytes / 4; ++i) f[i] = 0.001f * static_cast<float>(i % 97);
      } else {
        // 2^-7 in either 16-bit format: a normal number in both.
        const uint16_t code = t == dt::bf16 ? 0x3c00 : 0x2000;
        auto* h = reinterpret_cast<uint16_t*>(p);
        for (size_t i = 0; i < bytes / 2; ++i) h[i] = code;
      }
    };
    fill(A, in_type);
    fill(B, in_type);
    dnnl::matmul mm(pd);
    auto run = [&] {
      mm.execute(s, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
      s.wait();
    };
    run();
    double best = 1e30;
    for (int i = 0; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    out.supported = true;
    out.gflops =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / best / 1e9;
  } catch (const dnnl::error& e) {
    throw_runtime(std::string("oneDNN matmul for bench peak failed: ") + e.what());
  }
  return out;
}

}  // namespace crest
