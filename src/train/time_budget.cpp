#include "time_budget.hpp"

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "crest/core/units.hpp"

namespace crest {
namespace {

// SLURM_JOB_END_TIME: the job's end in seconds since the Unix epoch; nullopt when absent or not
// a number.
std::optional<double> slurm_end_time() {
  const char* v = std::getenv("SLURM_JOB_END_TIME");
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(t > 0)) return std::nullopt;
  return t;
}

}  // namespace

TimeBudget::TimeBudget(const TrainConfig& config, Clock::time_point started) : started_(started) {
  if (const char* x = std::getenv("CREST_TEST_SECONDS_PER_STEP"))
    test_seconds_per_step_ = std::max(0.0, std::atof(x));
  if (config.max_wall_time_s) {
    deadline_ = *config.max_wall_time_s;
    source_ = "train.max_wall_time " + human_duration(*deadline_);
  } else if (config.max_wall_time_auto) {
    if (const auto end = slurm_end_time()) {
      // Wall-clock seconds to the end, measured from the run's start on the steady clock.
      const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
      deadline_ = *end - static_cast<double>(std::time(nullptr)) + elapsed;
      source_ =
          "SLURM_JOB_END_TIME (" + human_duration(std::max(0.0, *deadline_ - elapsed)) + " left)";
    }
  }
}

double TimeBudget::now_s() const {
  return std::chrono::duration<double>(Clock::now() - started_).count() + test_offset_s_;
}

void TimeBudget::step_done(double seconds) {
  test_offset_s_ += test_seconds_per_step_;
  slowest_step_s_ = std::max(slowest_step_s_, seconds + test_seconds_per_step_);
}

void TimeBudget::checkpoint_done(double seconds) {
  slowest_checkpoint_s_ = std::max(slowest_checkpoint_s_, seconds);
}

void TimeBudget::validation_done(double seconds) {
  slowest_validation_s_ = std::max(slowest_validation_s_, seconds);
}

double TimeBudget::left_s() const { return deadline_ ? *deadline_ - now_s() : 1e300; }

double TimeBudget::margin_s() const {
  // Until a checkpoint has been timed, assume it costs what a step does.
  const double checkpoint = slowest_checkpoint_s_ > 0 ? slowest_checkpoint_s_ : slowest_step_s_;
  return 2 * slowest_step_s_ + 2 * checkpoint + slowest_validation_s_;
}

}  // namespace crest
