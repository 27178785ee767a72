// The oneDNN CPU backend. Everything that calls oneDNN lives in this folder, so moving to a newer
// oneDNN (3.x changed the descriptor API) touches nothing else in crest.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest {

std::unique_ptr<Backend> make_onednn_backend();

namespace onednn {
// The engine and stream of a oneDNN backend, for the kernels it registers with
// CREST_REGISTER_KERNEL (their makers receive only the Backend). Throws crest::Error (usage)
// when `backend` is not the onednn backend.
ContextPtr backend_context(Backend& backend);
// Whether this backend computes in `dtype` on this CPU, and why not (dtype_support.cpp).
Support dtype_support(DType dtype);
}  // namespace onednn

}  // namespace crest
