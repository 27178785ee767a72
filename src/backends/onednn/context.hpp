// The one oneDNN engine and stream a backend (and every kernel it made) executes on.
#pragma once
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

namespace crest::onednn {

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

// Kernels hold a shared pointer so they stay valid if they outlive the backend object.
using ContextPtr = std::shared_ptr<Context>;

}  // namespace crest::onednn
