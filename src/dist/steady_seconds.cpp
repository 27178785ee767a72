// steady_seconds (crest/dist/communicator.hpp): the one clock of communication timings.
#include <chrono>

#include "crest/dist/communicator.hpp"

namespace crest {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace crest
