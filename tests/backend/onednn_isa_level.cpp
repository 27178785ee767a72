// The instruction-set matrix (tests/CMakeLists.txt): ctest runs the agreement, op-table, gradient
// and parity tests again with ONEDNN_MAX_CPU_ISA capped to each level (SSE4.1, AVX2, ...) and
// CREST_TEST_ISA_LEVEL naming it. oneDNN silently runs at the CPU's own level when the cap is
// above it, which would only repeat the uncapped run (crest's own loops follow the same cap,
// widest_vectors.hpp): this environment checks that oneDNN really
// dispatches to the named level and otherwise ends the process with 77, which ctest reports as
// skipped. So an AVX-512 machine proves the AVX2 and SSE4.1 paths too, and an AVX2 machine skips
// the AVX-512 levels by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "onednn/onednn_backend.hpp"

namespace crest {
namespace {

class IsaLevel : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* level = std::getenv("CREST_TEST_ISA_LEVEL");
    if (level == nullptr) return;  // the ordinary, uncapped run
    if (const char* whole = std::getenv("CREST_MAX_CPU_ISA"); whole != nullptr && *whole != '\0') {
      std::cout << "ISA level " << level << " skipped: CREST_MAX_CPU_ISA=" << whole
                << " caps this whole run\n";
      std::exit(77);
    }
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    const auto want = onednn::isa_named(level);
    if (!want || cap == nullptr || std::string(cap) != level) {
      std::cerr << "CREST_TEST_ISA_LEVEL=" << level
                << ": expected one of the matrix's levels with ONEDNN_MAX_CPU_ISA set to it\n";
      std::exit(2);
    }
    const dnnl::cpu_isa got = dnnl::get_effective_cpu_isa();
    if (got != *want) {
      std::cout << "ISA level " << level
                << " skipped: this CPU cannot run it (oneDNN dispatches to "
                << onednn::isa_name(got) << " under the cap)\n";
      std::exit(77);
    }
    std::cout << "ISA level " << level << ": " << onednn::instruction_sets() << "\n";
  }
};

const auto* const kIsaLevel = ::testing::AddGlobalTestEnvironment(new IsaLevel);

}  // namespace
}  // namespace crest
