// Which dtypes the oneDNN backend computes in on this CPU. bf16 and f16 are accepted only where
// the CPU has their instructions: elsewhere oneDNN converts every element through float32 and
// runs slower than float32 itself, which is never what a user asking for mixed precision wants.
// oneDNN's own view of the CPU (its effective ISA) decides, so DNNL_MAX_CPU_ISA limits it too.
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "crest/core/error.hpp"
#include "onednn/onednn_backend.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn {
namespace {

using dnnl::cpu_isa;

// oneDNN's ISA values are bit sets: each contains the bits of the ones it extends.
bool has_isa(cpu_isa have, cpu_isa want) {
  const auto h = static_cast<unsigned>(have), w = static_cast<unsigned>(want);
  return (h & w) == w;
}

}  // namespace

std::string isa_name(cpu_isa isa) {
  switch (isa) {
    case cpu_isa::avx512_core_amx_fp16:
      return "AVX-512 with AMX-FP16";
    case cpu_isa::avx512_core_amx:
      return "AVX-512 with AMX-BF16";
    case cpu_isa::avx512_core_fp16:
      return "AVX-512 FP16";
    case cpu_isa::avx512_core_bf16:
      return "AVX-512 BF16";
    case cpu_isa::avx512_core_vnni:
      return "AVX-512 VNNI";
    case cpu_isa::avx512_core:
      return "AVX-512";
    case cpu_isa::avx2_vnni_2:
    case cpu_isa::avx2_vnni:
    case cpu_isa::avx2:
      return "AVX2";
    default:
      return "below AVX2";
  }
}

std::optional<cpu_isa> isa_named(const std::string& name) {
  static const std::map<std::string, cpu_isa> levels{
      {"SSE41", cpu_isa::sse41},
      {"AVX", cpu_isa::avx},
      {"AVX2", cpu_isa::avx2},
      {"AVX2_VNNI", cpu_isa::avx2_vnni},
      {"AVX2_VNNI_2", cpu_isa::avx2_vnni_2},
      {"AVX512_CORE", cpu_isa::avx512_core},
      {"AVX512_CORE_VNNI", cpu_isa::avx512_core_vnni},
      {"AVX512_CORE_BF16", cpu_isa::avx512_core_bf16},
      {"AVX512_CORE_FP16", cpu_isa::avx512_core_fp16},
      {"AVX512_CORE_AMX", cpu_isa::avx512_core_amx},
      {"AVX512_CORE_AMX_FP16", cpu_isa::avx512_core_amx_fp16},
      {"ALL", cpu_isa::isa_default},
      {"DEFAULT", cpu_isa::isa_default},
  };
  const auto it = levels.find(cpu_isa_spelling(name));
  return it == levels.end() ? std::nullopt : std::optional(it->second);
}

void apply_isa_cap() {
  // oneDNN takes a cap once, before its first primitive: the first backend applies it.
  static const bool applied = [] {
    cpu_level();  // validates whichever variable is set (crest::Error naming it)
    const char* crest_cap = std::getenv("CREST_MAX_CPU_ISA");
    if (crest_cap == nullptr || *crest_cap == '\0') return false;  // oneDNN reads its own
    const auto isa = isa_named(crest_cap);
    if (!isa) throw_usage(std::string("CREST_MAX_CPU_ISA=") + crest_cap + ": not a oneDNN level");
    try {
      dnnl::set_max_cpu_isa(*isa);
    } catch (const dnnl::error& e) {
      throw_runtime(std::string("CREST_MAX_CPU_ISA=") + crest_cap +
                    ": oneDNN had already chosen its instruction set (" + e.what() + ")");
    }
    return true;
  }();
  (void)applied;
}

bool amx_bf16_kernels() { return has_isa(dnnl::get_effective_cpu_isa(), cpu_isa::avx512_core_amx); }

std::string instruction_sets() {
  return "oneDNN " + isa_name(dnnl::get_effective_cpu_isa()) + ", crest loops " +
         cpu_level_name(cpu_level());
}

Support dtype_support(DType dtype) {
  const cpu_isa isa = dnnl::get_effective_cpu_isa();
  const std::string seen = " (oneDNN sees " + isa_name(isa) + " on this CPU)";
  switch (dtype) {
    case DType::f32:
      return Support::yes();
    case DType::bf16:
      if (has_isa(isa, cpu_isa::avx512_core_bf16)) return Support::yes();
      return Support::no("bf16 needs the AVX512_BF16 or AMX-BF16 instructions" + seen +
                         "; without them oneDNN emulates bf16 slower than float32");
    case DType::f16:
      if (has_isa(isa, cpu_isa::avx512_core_fp16)) return Support::yes();
      return Support::no("fp16 needs the AVX512_FP16 instructions" + seen +
                         "; without them oneDNN emulates fp16 slower than float32");
    default:
      return Support::no(dtype_name(dtype) +
                         ": the onednn backend computes in f32, and in bf16 or fp16 where the CPU "
                         "has them (float64 runs on the reference backend)");
  }
}

}  // namespace crest::onednn
