// The reference backend: plain loops in f32 and f64, written to be obviously correct. It is the
// oracle every optimized backend is tested against and the backend gradient checks run on; it is
// never meant to be fast.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"

namespace crest {

std::unique_ptr<Backend> make_reference_backend();

}  // namespace crest
