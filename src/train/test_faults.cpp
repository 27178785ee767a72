#include "test_faults.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "crest/core/bf16.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/core/memory_resource.hpp"

namespace crest {

namespace {

// Whether the variable `name` ("G" or "G@R") asks for `global_step` on `rank`.
bool asked(const char* name, int64_t global_step, int rank) {
  const char* v = std::getenv(name);
  if (!v) return false;
  char* end = nullptr;
  const long long step = std::strtoll(v, &end, 10);
  if (*end == '@' && std::atoi(end + 1) != rank) return false;
  return step == global_step;
}

// asked(), true at most once per process for the fault whose flag `done` is.
bool asked_once(const char* name, int64_t step, int rank, bool& done) {
  if (done || !asked(name, step, rank)) return false;
  done = true;
  return true;
}

}  // namespace

namespace {

// A NaN into the first element of `x`, in `memory`.
void write_nan(MemoryResource& memory, const TensorView& x) {
  const DType t = x.desc().dtype;
  CREST_CHECK(t == DType::f32 || is_half(t),
              "CREST_TEST_NONFINITE_AT_STEP needs a float32 or 16-bit input");
  HostStaging host(memory, x.data(), dtype_size(t));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (t == DType::f32)
    host.as<float>()[0] = nan;
  else  // a 16-bit input (CompileOptions::half_inputs)
    host.as<uint16_t>()[0] = t == DType::bf16 ? float_to_bf16(nan) : float_to_fp16(nan);
  host.commit();
}

bool nonfinite_asked(int64_t global_step, int rank) {
  static bool done = false;
  return asked_once("CREST_TEST_NONFINITE_AT_STEP", global_step, rank, done);
}

}  // namespace

bool inject_nonfinite_input_if_asked(Executor& ex, const std::string& input, int64_t global_step,
                                     int rank) {
  if (!nonfinite_asked(global_step, rank)) return false;
  write_nan(ex.params().memory(), ex.input(input));
  return true;
}

bool inject_nonfinite_sample_if_asked(const LoadedBatch& batch, int64_t global_step, int rank) {
  if (!nonfinite_asked(global_step, rank)) return false;
  if (batch.sample.numel() == 0) return false;  // a rank that reads the targets alone has none
  write_nan(host_memory(), batch.sample);
  return true;
}

bool gradient_overflow_asked(int64_t global_step, int rank) {
  static bool done = false;
  return asked_once("CREST_TEST_GRAD_OVERFLOW_AT_STEP", global_step, rank, done);
}

bool batch_failure_asked(int64_t global_step, int rank) {
  static bool done = false;
  return asked_once("CREST_TEST_BATCH_FAILURE_AT_STEP", global_step, rank, done);
}

bool validation_failure_asked(int epoch, int rank) {
  static bool done = false;
  return asked_once("CREST_TEST_VALIDATION_FAILURE_AT_EPOCH", epoch, rank, done);
}

std::optional<bool> read_ahead_forced() {
  const char* v = std::getenv("CREST_TEST_READ_AHEAD");
  if (v == nullptr) return std::nullopt;
  if (std::strcmp(v, "0") != 0 && std::strcmp(v, "1") != 0)
    throw_usage(std::string("CREST_TEST_READ_AHEAD must be 0 or 1, got '") + v + "'");
  return v[0] == '1';
}

}  // namespace crest
