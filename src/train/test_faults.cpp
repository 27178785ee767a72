#include "test_faults.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"

namespace crest {

bool inject_nonfinite_input_if_asked(Executor& ex, const std::string& input, int64_t global_step,
                                     int rank) {
  static bool done = false;
  const char* v = std::getenv("CREST_TEST_NONFINITE_AT_STEP");
  if (done || !v) return false;
  char* end = nullptr;
  const long long step = std::strtoll(v, &end, 10);
  if (*end == '@' && std::atoi(end + 1) != rank) return false;
  if (step != global_step) return false;
  const TensorView x = ex.input(input);
  CREST_CHECK(x.desc().dtype == DType::f32, "CREST_TEST_NONFINITE_AT_STEP needs a float32 input");
  HostStaging host(ex.params().memory(), x.data(), sizeof(float));
  host.as<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  host.commit();
  done = true;
  return true;
}

}  // namespace crest
