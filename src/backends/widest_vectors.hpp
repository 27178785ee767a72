// crest's own vector loops, compiled once per instruction-set level and chosen at run time.
//
// crest's code is compiled for the x86-64 baseline (CREST_NATIVE is off by default, so one binary
// runs on every node); the few loops that stream large tensors (weight bridges, optimizer updates,
// Winograd transforms, dilated depthwise, bf16 sums, the cross-entropy) are worth the machine's
// widest vectors. Each such file keeps those loops in a `.inc` file that
// widest_vectors_expand.hpp includes three times, in namespaces isa_avx512 (compiled for
// AVX-512F), isa_avx2 (AVX2) and isa_baseline; CREST_WIDEST_VECTORS_CALL picks one by
// cpu_level(): the CPU's widest, capped by CREST_MAX_CPU_ISA (or oneDNN's ONEDNN_MAX_CPU_ISA
// when that alone is set), so one variable caps oneDNN's kernels and crest's loops alike and an
// AVX-512 machine can run, and test, the AVX2 path. (GCC's target_clones chose from the CPU
// alone, before any code ran: nothing could cap it.)
//
// An OpenMP region inside a loop function inherits the function's target, so the parallel loop
// must sit in the .inc function itself, not in an always_inline helper (a region inside the
// helper would be outlined once, for the baseline). Helpers defined outside the .inc are inlined
// into each copy. Results are the same from every copy where each element is computed on its own
// or reductions keep their order (CMakeLists.txt turns off FMA contraction).
//
// A lambda inside such a helper is a function of its own, compiled for the baseline wherever the
// optimiser leaves it out of line. One that takes or returns a 64-byte vector value (lanes.hpp,
// double_lanes.hpp) must then be inlined (CREST_INLINED_LAMBDA): the AVX-512 copy passes the
// value in a zmm register, the baseline lambda reads it from the stack. Which lambdas GCC inlines
// otherwise is its heuristics' choice: under AddressSanitizer's instrumentation GCC 12 kept the
// 3-D Winograd's output lambda out of line, and every bf16 output of the AVX-512 copy was garbage.
#pragma once
#include <string>

namespace crest {

enum class CpuLevel { baseline, avx2, avx512 };

// The level crest's loops run at: min(the CPU's, the cap). The cap comes from CREST_MAX_CPU_ISA,
// else ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA, in oneDNN's spellings (SSE41, AVX2, AVX2_VNNI,
// AVX512_CORE, AVX512_CORE_BF16, AVX512_CORE_AMX, ..., ALL). Read once; an unknown value throws
// crest::Error (usage) naming the variable.
CpuLevel cpu_level();
// The CPU's own widest level, uncapped.
CpuLevel cpu_level_of_this_cpu();
// "AVX-512", "AVX2", "x86-64 baseline".
std::string cpu_level_name(CpuLevel level);
// A level's spelling as oneDNN reads it: "avx2" -> "AVX2" (the variables are case-insensitive).
std::string cpu_isa_spelling(std::string name);
// The capping variable in effect ("CREST_MAX_CPU_ISA=AVX2"), or "" when none is set.
std::string cpu_level_cap();

}  // namespace crest

// After a lambda's parameter list: the lambda is inlined wherever it is called, or the build fails.
#define CREST_INLINED_LAMBDA __attribute__((always_inline))

// Calls loop function `f` (overloads and templates deduce as usual) in the copy cpu_level() picks.
#define CREST_WIDEST_VECTORS_CALL(f, ...)                                         \
  (::crest::cpu_level() == ::crest::CpuLevel::avx512 ? isa_avx512::f(__VA_ARGS__) \
   : ::crest::cpu_level() == ::crest::CpuLevel::avx2 ? isa_avx2::f(__VA_ARGS__)   \
                                                     : isa_baseline::f(__VA_ARGS__))
