// crest: (a crest addition) the backend, its threads, the precision it computes in and whether
// it chooses layouts by measuring them.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/sections.hpp"
#include "crest/backends/kernels.hpp"
#include "crest/core/cpus.hpp"

namespace crest::config {
namespace {

using S = RuntimeConfig;

// Why a backend named in the config cannot run: unknown, or built but missing what it needs here
// (a GPU), in make_backend's words.
std::string backend_refusal(const std::string& name, const std::vector<std::string>& usable) {
  const auto built = built_backend_names();
  if (std::find(built.begin(), built.end(), name) != built.end()) {
    try {
      make_backend(name);
    } catch (const Error& e) {
      return e.what();
    }
  }
  return "unknown backend " + quote(name) + " (available: " + join_list(usable) + ")";
}

Field<S> backend_field() {
  return {"backend",
          [](const SectionReader& r, S& s) {
            const auto b = r.opt_string("backend");
            if (!b) return;
            const auto names = backend_names();
            if (std::find(names.begin(), names.end(), *b) == names.end())
              r.fail("backend", backend_refusal(*b, names));
            s.backend = *b;
          },
          [](const S& s, Lines& l) { l.add("backend", s.backend); }};
}

// float64 is the oracle mode; a backend without double kernels (onednn) cannot run it, and
// silently computing in float32 instead would defeat the comparison it is asked for. bf16 and
// fp16 are refused where the CPU lacks their instructions (the reason names them): emulated,
// they would run slower than float32.
void check_precision(const SectionReader& r, S& s) {
  if (s.precision == Precision::float32) return;
  const auto backend = make_backend(s.backend);
  const DType dtype = precision_half(s.precision).value_or(precision_dtype(s.precision));
  if (const Support ok = backend->supports_dtype(dtype); !ok)
    r.fail("precision",
           enum_name(s.precision) + " is not supported by crest.backend " + s.backend + ": " +
               ok.reason +
               (dtype == DType::f64 ? " (use crest.backend: reference for float64)" : ""));
}

// A step recorded as a graph needs a stream that records; the run's other settings (ranks,
// accumulation, lag) are checked where the step is made (TrainStep::record_passes).
void check_graphs(const SectionReader& r, const S& s) {
  if (!s.cuda_graphs) return;
  if (!make_backend(s.backend)->stream().captures())
    r.fail("cuda_graphs", "crest.backend " + s.backend +
                              " runs its work as it is called and records no graphs (use "
                              "crest.backend: cuda)");
}

// threads: 0 takes OMP_NUM_THREADS where it is set: a value that is no count is refused here,
// with the config, before the run writes anything.
void check_threads(const SectionReader& r, const S& s) {
  if (s.threads != 0) return;
  try {
    parse_omp_num_threads(std::getenv("OMP_NUM_THREADS"));
  } catch (const Error& e) {
    r.fail("threads", std::string("0 takes the count from the environment: ") + e.what());
  }
}

void check_runtime(const SectionReader& r, S& s) {
  check_threads(r, s);
  check_precision(r, s);
  check_graphs(r, s);
}

}  // namespace

const Table<RuntimeConfig>& runtime_table() {
  static const Table<S> t{
      "crest",
      {backend_field(), int_field("threads", &S::threads, 0, 1 << 16),
       enum_field("precision", &S::precision), bool_field("autotune", &S::autotune),
       number_field("max_memory_gb", &S::max_memory_gb, non_negative()),
       bool_field("cuda_graphs", &S::cuda_graphs)},
      check_runtime};
  return t;
}

}  // namespace crest::config
