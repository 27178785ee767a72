// The oneDNN CPU backend. Everything that calls oneDNN lives in this folder, so moving to a newer
// oneDNN (3.x changed the descriptor API) touches nothing else in crest.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"

namespace crest {

std::unique_ptr<Backend> make_onednn_backend();

}  // namespace crest
