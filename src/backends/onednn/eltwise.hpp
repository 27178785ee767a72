// Element-wise activations: the algorithm mapping (shared with the conv post-op) and the kernel.
#pragma once
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

// oneDNN's form of a crest activation. `backward` is the variant whose backward pass reads the
// output (dst), which is what crest keeps for backward.
struct EltwiseAlgorithm {
  dnnl::algorithm forward;
  dnnl::algorithm backward;
  float alpha = 0.f;
  float beta = 0.f;
};

// Throws crest::Error (usage) for kinds the dst-based backward cannot express.
EltwiseAlgorithm eltwise_algorithm(const EltwiseDesc& e);

// Whether eltwise_algorithm(e) succeeds (what Backend::fuses reports).
bool eltwise_supported(const EltwiseDesc& e);

std::unique_ptr<EltwiseKernel> make_eltwise(ContextPtr ctx, const EltwiseDesc& d,
                                            const MemFormat& f);

}  // namespace crest::onednn
