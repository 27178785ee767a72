#include "crest/backends/stream.hpp"

#include "crest/core/error.hpp"

namespace crest {

void Stream::begin_capture() {
  throw_usage("this backend's stream runs its work as it is queued and records none");
}

void Stream::end_capture(std::unique_ptr<StreamGraph>& /*graph*/) {
  throw_usage("this backend's stream runs its work as it is queued and records none");
}

}  // namespace crest
