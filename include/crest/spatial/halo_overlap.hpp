// Overlapping a split convolution's halo exchange with its compute (docs/distributed.md, "Halo
// overlap"), LBANN's scheme: post the halo, compute while it travels, then the boundary.
//
// A rank's output rows split, along each axis whose rows move, into the *boundary* (the rows
// that read a neighbour's rows) and the *interior* (the rest); where two or three axes are split
// the boundary is a shell. The layer's own kernel runs on the whole window while the halo
// travels, its halo rows zero; the boundary outputs it gets wrong are then computed again by small
// kernels on their windows, once the halo is in. The shell is cut into disjoint *pieces*, one per
// axis and end: along axis a the boundary rows, along the axes before it their interior only,
// along the axes after it every row. Every pass is linear in what the pieces split, so:
// - forward: the pieces' outputs overwrite the whole kernel's;
// - backward data: the pieces run first and their window gradients, summed, are the halo's
//   gradient (only boundary outputs reach it), sent while the whole kernel computes the window's
//   gradient;
// - weight gradient, bilinear in the input: the whole kernel on the window with zero halo, plus
//   the pieces on their windows with only their halo rows (own rows zero).
// The boundary is computed twice, so by default a boundary of more than 1/32 of the outputs
// (smaller blocks) runs exchange-then-compute instead.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/graph/window_axis.hpp"
#include "crest/spatial/decomposition.hpp"
#include "crest/spatial/halo_exchange.hpp"

namespace crest {

class FormatBridge;

// dist.halo_overlap: auto (overlap where the boundary is at most 1/32 of the output rows),
// always (wherever the interior is not empty: what the tests use to reach every case), off.
enum class HaloOverlapMode { off, automatic, always };
HaloOverlapMode parse_halo_overlap(const std::string& text, const std::string& key);
std::string halo_overlap_name(HaloOverlapMode mode);

// A block's dims as stored: [n, channels, rows...] plain, [n, rows..., channels] channels-last;
// and the dim of spatial axis `axis` in it.
std::vector<int64_t> block_dims(int64_t n, int64_t channels, const std::vector<int64_t>& rows,
                                Layout layout);
int spatial_dim(int axis, Layout layout);

// The boundary kernels of one split convolution (this rank's part), built where the split can
// overlap.
class ConvBoundaries {
 public:
  // What the layer gives: the whole convolution, this rank's kernel descriptor (`local`), the
  // halo exchange of its input and the block layouts. `why_not` receives why the layer cannot
  // overlap ("" where it can).
  struct Layer {
    const ConvDesc& global;
    const ConvDesc& local;
    const HaloExchange& halo;
    Layout src_layout, dst_layout;
  };
  static std::unique_ptr<ConvBoundaries> make(Backend& backend, const Layer& layer,
                                              HaloOverlapMode mode, std::string& why_not);
  ~ConvBoundaries();

  size_t scratch_bytes() const { return scratch_bytes_; }
  // "overlapped: the interior rows [1, 15) of [0, 16) along depth ...": for profiles.
  const std::string& description() const { return description_; }

  // `window`: the gathered window (halo in), in the source block layout; `dst`: the output block,
  // whose boundary rows are overwritten.
  void forward(const void* window, const void* weights, const void* bias, void* dst, void* scratch);
  // Writes the window gradient's halo rows (the neighbours' rows) into `window_grad`; its own
  // rows are left partial (the whole kernel overwrites them).
  void backward_halo(const void* diff_dst, const void* weights, void* window_grad, void* scratch);
  // Adds the halo rows' part of the weight gradient into `diff_weights`.
  void add_halo_weight_grad(const void* window, const void* diff_dst, void* diff_weights,
                            void* scratch);

  struct Piece;
  // A moving axis: its spatial axis, its dim in the window and in the output block, and this
  // rank's rows along it (the window's, the owned outputs', and its own within the window).
  struct Axis {
    int spatial = 0, src_dim = 0, dst_dim = 0;
    IndexRange window, owned_out, own_in;
  };

 private:
  ConvBoundaries() = default;
  // The kernel computing output rows `out` (one range per moving axis) from their window; null
  // where that window would need negative padding (a transposed convolution).
  std::unique_ptr<Piece> make_piece(Backend& backend, const Layer& layer,
                                    const std::vector<IndexRange>& out);
  std::vector<Axis> axes_;
  std::vector<std::unique_ptr<Piece>> pieces_;
  std::vector<int64_t> window_dims_, dst_dims_;
  int64_t weight_count_ = 0;
  DType dtype_ = DType::f32;
  size_t scratch_bytes_ = 0;
  std::string description_;
};

}  // namespace crest
