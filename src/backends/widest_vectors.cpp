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

// oneDNN's spellings of its levels (ONEDNN_MAX_CPU_ISA), read as crest's three.
constexpr std::pair<const char*, CpuLevel> kSpellings[] = {
    {"SSE41", CpuLevel::baseline},
    {"AVX", CpuLevel::baseline},
    {"AVX2", CpuLevel::avx2},
    {"AVX2_VNNI", CpuLevel::avx2},
    {"AVX2_VNNI_2", CpuLevel::avx2},
    {"AVX512_CORE", CpuLevel::avx512},
    {"AVX512_CORE_VNNI", CpuLevel::avx512},
    {"AVX512_CORE_BF16", CpuLevel::avx512},
    {"AVX512_CORE_FP16", CpuLevel::avx512},
    {"AVX512_CORE_AMX", CpuLevel::avx512},
    {"AVX512_CORE_AMX_FP16", CpuLevel::avx512},
    {"ALL", CpuLevel::avx512},
    {"DEFAULT", CpuLevel::avx512},
};

CpuLevel level_named(const std::string& variable, const std::string& raw) {
  const std::string value = cpu_isa_spelling(raw);
  std::string known;
  for (const auto& [spelling, level] : kSpellings) {
    if (value == spelling) return level;
    known += std::string(known.empty() ? "" : ", ") + spelling;
  }
  throw_usage(variable + "=" + raw + ": not an instruction-set level (" + known + ")");
}

}  // namespace

std::string cpu_isa_spelling(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return name;
}

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
