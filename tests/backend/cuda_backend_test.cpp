// The CUDA backend where there is no GPU (every CPU machine, CI): it is built when the toolkit is
// there, a run that asks for it is refused before any work with the reason and exit 2, and a
// start-up never picks it by default. Its numbers are checked on a GPU by cuda_agreement_test.cpp
// (scripts/device-check.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "crest/backends/kernels.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Skips unless the backend is built and this machine has no device for it.
#define SKIP_UNLESS_CUDA_BUILT_WITHOUT_A_DEVICE()                                      \
  do {                                                                                 \
    if (!contains(built_backend_names(), "cuda"))                                      \
      GTEST_SKIP() << "built without the CUDA backend (no toolkit at configure time)"; \
    if (contains(backend_names(), "cuda"))                                             \
      GTEST_SKIP() << "this machine has a CUDA device: the refusal cannot be seen";    \
  } while (0)

TEST(CudaBackend, WithoutADeviceIsRefusedNamingWhatIsMissing) {
  SKIP_UNLESS_CUDA_BUILT_WITHOUT_A_DEVICE();
  try {
    make_backend("cuda");
    FAIL() << "make_backend(\"cuda\") succeeded without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    const std::string m = e.what();
    EXPECT_NE(m.find("backend 'cuda' cannot run on this machine"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDA"), std::string::npos) << m;
  }
  EXPECT_NE(default_backend_name(), "cuda");
  EXPECT_TRUE(contains(backend_names(), "reference"));
}

TEST(CudaBackend, TheCommandLineRefusesItWithExitTwo) {
  SKIP_UNLESS_CUDA_BUILT_WITHOUT_A_DEVICE();
  const auto peak = test::run_crest("bench peak --backend cuda");
  EXPECT_EQ(peak.code, 2) << peak.out;
  EXPECT_NE(peak.out.find("backend 'cuda' cannot run on this machine"), std::string::npos)
      << peak.out;
  // A config naming it: refused while the config is read, naming the key.
  const auto train =
      test::run_crest("train --config " + test::source_path("configs/cosmoflow-demo.yaml") +
                      " crest.backend=cuda --dry-run");
  EXPECT_EQ(train.code, 2) << train.out;
  EXPECT_NE(train.out.find("backend"), std::string::npos) << train.out;
  EXPECT_NE(train.out.find("backend 'cuda' cannot run on this machine"), std::string::npos)
      << train.out;
}

// The plugin that holds the backend (libcrest_cuda.so) cannot be loaded: missing CUDA libraries
// look the same to the loader. Refused with dlopen's reason, exit 2, device or not.
TEST(CudaBackend, AMissingPluginIsRefusedNamingTheFile) {
  if (!contains(built_backend_names(), "cuda"))
    GTEST_SKIP() << "built without the CUDA backend (no toolkit at configure time)";
  const auto r = test::run_shell("CREST_CUDA_PLUGIN=/nonexistent/libcrest_cuda.so " +
                                 std::string(CREST_BINARY) + " bench peak --backend cuda 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot load the CUDA backend"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/libcrest_cuda.so"), std::string::npos) << r.out;
}

// A CPU run never loads the CUDA libraries: they cost every rank 0.2 s and 250 MB at start-up.
TEST(CudaBackend, ACpuRunDoesNotLoadTheCudaLibraries) {
  if (!contains(built_backend_names(), "cuda"))
    GTEST_SKIP() << "built without the CUDA backend (no toolkit at configure time)";
  const auto r = test::run_shell("LD_DEBUG=libs " + std::string(CREST_BINARY) +
                                 " --version 2>&1 | grep -c -E 'libcu(dnn|blas|dart)' || true");
  EXPECT_EQ(r.out, "0\n") << "crest --version loaded a CUDA library";
}

}  // namespace
}  // namespace crest
