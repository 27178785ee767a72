// Overlapping a split window layer's halo exchange with its compute (docs/distributed.md, "Halo
// overlap"), LBANN's scheme: post the halo, compute while it travels, then the boundary.
//
// The layer's own kernel runs on the whole window while the halo travels, its halo rows zero; the
// boundary outputs it gets wrong (boundary_pieces.hpp: a slab per split axis and end, a shell
// where two or three axes are split, cut into disjoint pieces) are then computed again by small
// kernels on the pieces' windows, once the halo is in. Every pass is linear in what the pieces
// partition, so for a convolution:
// - forward: the pieces' outputs overwrite the whole kernel's;
// - backward data: the pieces run first and their window gradients, summed, are the halo's
//   gradient (only boundary outputs reach it), sent while the whole kernel computes the window's
//   gradient;
// - weight gradient, bilinear in the input: the whole kernel on the window with zero halo, plus
//   the pieces on their windows with only their halo rows (own rows zero).
// Pooling (PoolBoundaries) keeps each piece's workspace from forward to backward: backward runs
// the pieces on their outputs' gradients and the whole kernel on the interior's alone.
// The boundary is computed twice, so by default a boundary of more than 1/32 of the outputs
// (smaller blocks) runs exchange-then-compute instead.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/spatial/boundary_pieces.hpp"

namespace crest {

class FormatBridge;

HaloOverlapMode parse_halo_overlap(const std::string& text, const std::string& key);
std::string halo_overlap_name(HaloOverlapMode mode);

// The boundary kernels of one split convolution (this rank's part), built where the split can
// overlap.
class ConvBoundaries {
 public:
  // `why_not` receives why the layer cannot overlap ("" where it can).
  using Layer = SplitWindowLayer<ConvDesc>;
  static std::unique_ptr<ConvBoundaries> make(Backend& backend, const Layer& layer,
                                              HaloOverlapMode mode, std::string& why_not);
  ~ConvBoundaries();

  size_t scratch_bytes() const { return scratch_bytes_; }
  // "overlapped: the interior rows [1, 15) of [0, 16) along depth ...": for profiles.
  const std::string& description() const { return pieces_->description(); }

  // `window`: the gathered window (halo in), in the source block layout; `dst`: the output block,
  // whose boundary rows are overwritten.
  void forward(const void* window, const void* weights, const void* bias, void* dst, void* scratch);
  // Writes the window gradient's halo rows (the neighbours' rows) into `window_grad`; its own
  // rows are left partial (the whole kernel overwrites them).
  void backward_halo(const void* diff_dst, const void* weights, void* window_grad, void* scratch);
  // Adds the halo rows' part of the weight gradient into `diff_weights`.
  void add_halo_weight_grad(const void* window, const void* diff_dst, void* diff_weights,
                            void* scratch);

  struct Kernel;

 private:
  ConvBoundaries() = default;
  std::unique_ptr<BoundaryPieces> pieces_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  // one per piece
  int64_t weight_count_ = 0;
  DType dtype_ = DType::f32;
  size_t scratch_bytes_ = 0;
};

}  // namespace crest
