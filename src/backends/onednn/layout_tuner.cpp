// The layout tuner's clock and this machine's signature; the choices are TunedChoices'.
#include "onednn/layout_tuner.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>

namespace crest::onednn {
namespace {

constexpr int kFormatVersion = 1;

class ClockTimer final : public LayoutTimer {
 public:
  explicit ClockTimer(int repetitions) : repetitions_(std::max(1, repetitions)) {}
  double seconds(const std::string& /*candidate*/, const std::string& /*pass*/,
                 const std::function<void()>& call) override {
    call();  // warm-up
    double best = 0;
    for (int i = 0; i < repetitions_; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i == 0 || s < best) best = s;
    }
    return best;
  }

 private:
  int repetitions_;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "unknown cpu";
}

}  // namespace

std::unique_ptr<LayoutTimer> make_clock_timer(int repetitions) {
  return std::make_unique<ClockTimer>(repetitions);
}

std::string machine_signature() {
  const dnnl_version_t* v = dnnl_version();
  return cpu_model() + "; oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + " isa " +
         std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa())) + "; " +
         std::to_string(omp_get_max_threads()) + " threads";
}

LayoutTuner::LayoutTuner(LayoutTuning options, std::unique_ptr<LayoutTimer> timer, TunerNotes notes)
    : choices_(std::move(options), machine_signature(), std::move(notes)),
      timer_(std::move(timer)),
      verbose_(!env("CREST_AUTOTUNE_VERBOSE").empty()) {}

}  // namespace crest::onednn
