// The boundary kernels of one split pooling layer (this rank's part), built where the split can
// overlap its halo exchange with compute (halo_overlap.hpp, boundary_pieces.hpp).
//
// Forward the whole kernel runs on the window while the halo travels; once it is in, the pieces'
// kernels compute the boundary outputs again over the wrong ones, each keeping its own workspace
// (max pooling's indices) for backward. Backward, linear in the outputs' gradient: the pieces on
// their outputs' gradients give every window row's gradient from the boundary, which holds the
// halo rows' whole gradient and is sent at once; the whole kernel then runs on the interior's
// gradient alone (the boundary's zero: its own workspace is wrong there), and the two add up.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/spatial/boundary_pieces.hpp"

namespace crest {

class PoolBoundaries {
 public:
  using Layer = SplitWindowLayer<PoolDesc>;
  // Null, with why in `why_not`, where the layer cannot overlap.
  static std::unique_ptr<PoolBoundaries> make(Backend& backend, const Layer& layer,
                                              HaloOverlapMode mode, std::string& why_not);
  ~PoolBoundaries();

  // Transient memory per call, and the pieces' workspaces kept from forward to backward.
  size_t scratch_bytes() const { return scratch_bytes_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  const std::string& description() const { return pieces_->description(); }

  // `window`: the gathered window (halo in); the boundary outputs of `dst` are overwritten and
  // the pieces' workspaces written to `workspace`.
  void forward(const void* window, void* dst, void* workspace, void* scratch);
  // The window's gradient from the boundary outputs alone (zero where none reaches), in scratch:
  // its halo rows are the halo's whole gradient.
  const void* boundary_window_grad(const void* diff_dst, const void* workspace, void* scratch);
  // `diff_dst` with the boundary outputs zero, in scratch: what the whole kernel may take.
  const void* interior_grad(const void* diff_dst, void* scratch) const;

  struct Kernel;

 private:
  PoolBoundaries() = default;
  std::unique_ptr<BoundaryPieces> pieces_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  // one per piece
  DType dtype_ = DType::f32;
  size_t window_grad_at_ = 0, interior_at_ = 0;  // in scratch, after the pieces' transient part
  size_t scratch_bytes_ = 0, workspace_bytes_ = 0;
};

}  // namespace crest
