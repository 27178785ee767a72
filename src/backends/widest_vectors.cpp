#include "widest_vectors.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <utility>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// The variable that caps the level, and its value; nullopt when none is set.
std::optional<std::pair<std::string, std::string>> cap_variable() {
  for (const char* name : {"CREST_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return {{name, v}};
  return std::nullopt;
}

// oneDNN's spellings of its levels, read as crest's three.
CpuLevel level_named(const std::string& variable, const std::string& raw) {
  std::string value = raw;
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (value == "ALL" || value == "DEFAULT" || value.rfind("AVX512", 0) == 0)
    return CpuLevel::avx512;
  if (value.rfind("AVX2", 0) == 0) return CpuLevel::avx2;
  if (value == "SSE41" || value == "AVX") return CpuLevel::baseline;
  throw_usage(variable + "=" + raw +
              ": not an instruction-set level (SSE41, AVX, AVX2, AVX2_VNNI, AVX512_CORE, "
              "AVX512_CORE_VNNI, AVX512_CORE_BF16, AVX512_CORE_FP16, AVX512_CORE_AMX, ALL)");
}

}  // namespace

CpuLevel cpu_level_of_this_cpu() {
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return CpuLevel::avx512;
  if (__builtin_cpu_supports("avx2")) return CpuLevel::avx2;
#endif
  return CpuLevel::baseline;
}

CpuLevel cpu_level() {
  static const CpuLevel level = [] {
    const CpuLevel cpu = cpu_level_of_this_cpu();
    const auto cap = cap_variable();
    return cap ? std::min(cpu, level_named(cap->first, cap->second)) : cpu;
  }();
  return level;
}

std::string cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::avx512:
      return "AVX-512";
    case CpuLevel::avx2:
      return "AVX2";
    case CpuLevel::baseline:
      break;
  }
  return "x86-64 baseline";
}

std::string cpu_level_cap() {
  const auto cap = cap_variable();
  return cap ? cap->first + "=" + cap->second : "";
}

}  // namespace crest
