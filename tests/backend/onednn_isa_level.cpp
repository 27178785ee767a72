// The instruction-set matrix (tests/CMakeLists.txt): ctest runs the agreement, op-table, gradient
// and parity tests again with ONEDNN_MAX_CPU_ISA capped to each level (SSE4.1, AVX2, ...) and
// CREST_TEST_ISA_LEVEL naming it. oneDNN silently runs at the CPU's own level when the cap is
// above it, which would only repeat the uncapped run (crest's own loops follow the same cap,
// widest_vectors.hpp): this environment checks that oneDNN really
// dispatches to the named level and otherwise ends the process with 77, which ctest reports as
// skipped. So an AVX-512 machine proves the AVX2 and SSE4.1 paths too, and an AVX2 machine skips
// the AVX-512 levels by name. The level the CPU runs uncapped is skipped too (77): the ordinary
// run has just tested it, and repeating it cost CI about three minutes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "onednn/onednn_backend.hpp"

namespace crest {
namespace {

// The level oneDNN dispatches to without the cap, asked in a child process: oneDNN reads
// ONEDNN_MAX_CPU_ISA once, at its first query, and a child forked after that inherits the
// latched cap: so it is asked before this process's first query.
// Its dnnl::cpu_isa value in decimal (isa_name joins levels); empty where the child could not
// answer (the caller then runs the level).
std::string uncapped_level() {
  int ends[2];
  if (pipe(ends) != 0) return "";
  const pid_t child = fork();
  if (child == 0) {
    close(ends[0]);
    unsetenv("ONEDNN_MAX_CPU_ISA");
    const std::string name = std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa()));
    const ssize_t written = write(ends[1], name.data(), name.size());
    _exit(written == static_cast<ssize_t>(name.size()) ? 0 : 1);
  }
  close(ends[1]);
  std::string name;
  char chunk[64];
  for (ssize_t got; child > 0 && (got = read(ends[0], chunk, sizeof chunk)) > 0;)
    name.append(chunk, static_cast<size_t>(got));
  close(ends[0]);
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return "";
  return name;
}

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
    const std::string uncapped = uncapped_level();  // before this process latches the cap
    const dnnl::cpu_isa got = dnnl::get_effective_cpu_isa();
    if (got != *want) {
      std::cout << "ISA level " << level
                << " skipped: this CPU cannot run it (oneDNN dispatches to "
                << onednn::isa_name(got) << " under the cap)\n";
      std::exit(77);
    }
    if (uncapped == std::to_string(static_cast<int>(got))) {
      std::cout << "ISA level " << level
                << " skipped: it is this CPU's own, which the uncapped run tests\n";
      std::exit(77);
    }
    std::cout << "ISA level " << level << ": " << onednn::instruction_sets() << "\n";
  }
};

const auto* const kIsaLevel = ::testing::AddGlobalTestEnvironment(new IsaLevel);

}  // namespace
}  // namespace crest
