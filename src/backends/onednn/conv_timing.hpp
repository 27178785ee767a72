// Timing one convolution layout candidate for the layout tuner: the passes a program will run
// (forward; backward data and weights when training), each with the weight layout bridges it
// runs, plus the reorder from the producer's layout into the candidate's src (and the input
// gradient's way back) when they differ. Runs on scratch tensors filled with data: untouched
// zero pages would make the first candidate pay for page faults the others do not.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>

#include "onednn/context.hpp"
#include "onednn/conv_passes.hpp"
#include "onednn/layout_tuner.hpp"

namespace crest::onednn {

struct ConvTimingProblem {
  WeightLayout weights;                    // crest's parameter layout (and the gradient's)
  dnnl::memory::desc bias;                 // empty without a bias
  std::optional<dnnl::memory::desc> hint;  // the producer's layout, when it has the src's shape
  bool training = true;                    // backward passes run
  bool data_grad = true;                   // backward data runs
};

// Seconds per step that `passes` (named `name`) costs, as `timer` measures each part.
double time_conv_candidate(LayoutTimer& timer, const ContextPtr& ctx, const std::string& name,
                           ConvPasses& passes, const ConvTimingProblem& p);

// The same for a whole kernel (crest's own, such as the Winograd convolutions): the passes `d`
// says will run, on buffers in the kernel's formats, plus the reorder from `hint` (the
// producer's layout, when it has the src's shape) and back where they differ.
double time_conv_kernel(LayoutTimer& timer, const ContextPtr& ctx, const std::string& name,
                        ConvKernel& kernel, const ConvDesc& d,
                        const std::optional<MemFormat>& hint);

}  // namespace crest::onednn
