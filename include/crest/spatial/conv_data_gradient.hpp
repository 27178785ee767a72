// A split convolution's input gradient from its output gradient's halo (docs/distributed.md,
// "Spatial split"), DistConv's backward scheme: the rank gathers the output-gradient rows that
// reach its own input rows (its own plus the neighbours' halo) and computes the gradient of
// exactly the input rows it owns. Nothing is sent back or summed.
//
// The other scheme, the window's gradient computed and its halo rows returned to their owners
// (SpatialConv's fallback), computes the gradient of the whole input window: 10 rows where a rank
// owns 8 for a 3-wide kernel, which a tiled kernel rounds up further (Winograd F(4,3): 3 tiles
// instead of 2). Here the kernel's output is the owned block. The local kernel is a convolution
// from the owned input rows to the output-gradient window, its padding such that each window row
// reads the input rows it reads in the whole convolution; only its data gradient runs.
//
// Where it cannot run, make() says why and SpatialConv returns the window's gradient instead:
// a split whose reversed window needs negative padding (a stride above the kernel's span, e.g. a
// 1x1 stride-2 convolution), whose output-gradient halo would reach past a neighbour, or whose
// kernel would be oneDNN's reference code where the forward's is not.
#pragma once
#include <memory>
#include <string>

#include "crest/backends/kernels.hpp"
#include "crest/spatial/spatial_window.hpp"

namespace crest {

class ConvDataGradient {
 public:
  // `global`: the whole convolution; `forward`: this rank's part of it (the forward kernel's
  // implementation and the block layouts, which the output gradient and input gradient keep).
  // Collective over the placement's group: every rank decides the same. Null (and `why_not`)
  // where the split cannot run this way.
  static std::unique_ptr<ConvDataGradient> make(Backend& backend, const ConvDesc& global,
                                                const ConvKernel& forward, const WindowPart& part,
                                                std::string& why_not);

  // Its scratch, in two parts: the output gradient's window (window_bytes()), which the halo
  // fills from start() to finish(), and the working memory (work_bytes(): the kernel-format
  // copies and the kernel's scratch) that only finish() and run() use while they run — so the
  // caller may lend that part to its own work between start() and finish() (SpatialConv: the
  // weight gradient's), and a split convolution holds its larger region, not both.
  using Scratch = DataGradScratch;
  size_t window_bytes() const { return window_bytes_; }
  size_t work_bytes() const { return work_.bytes(); }
  const HaloExchange& halo() const { return *halo_; }
  std::string implementation() const { return kernel_->implementation(); }

  // `diff_dst`: the owned output-gradient block; `diff_src`: the owned input-gradient block
  // (overwritten); `scratch`: used during the call only.
  void run(const void* diff_dst, const void* weights, void* diff_src, Scratch scratch);
  // run() in two halves, so the caller computes while the halo travels (SpatialConv: the weight
  // gradient): start posts the output gradient's halo into `window`, finish waits and computes.
  // Nothing else may touch `window` in between.
  std::unique_ptr<PendingCollective> start(const void* diff_dst, void* window);
  void finish(PendingCollective& pending, const void* weights, void* diff_src, Scratch scratch);

 private:
  ConvDataGradient() = default;
  std::unique_ptr<ConvKernel> kernel_;
  std::unique_ptr<HaloExchange> halo_;  // output-gradient block -> its window
  std::unique_ptr<FormatBridge> diff_dst_, diff_src_;
  size_t window_bytes_ = 0;
  WindowScratch work_;  // no window slice: the kernel-format copies and the kernel's scratch
};

}  // namespace crest
