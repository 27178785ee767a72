// The instruction-set matrix's runs (tests/CMakeLists.txt, "isa.<level>"; set up by
// tests/backend/onednn_isa_level.cpp), as a test sees them.
#pragma once
#include <cstdlib>
#include <string>

namespace crest::test {

// The level this run caps oneDNN and crest's own loops to, or "" in the ordinary, uncapped run.
inline std::string capped_isa_level() {
  const char* level = std::getenv("CREST_TEST_ISA_LEVEL");
  return level != nullptr ? level : "";
}

}  // namespace crest::test
