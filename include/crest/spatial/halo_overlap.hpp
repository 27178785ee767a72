// Overlapping a split convolution's halo exchange with its compute (docs/distributed.md, "Halo
// overlap"), LBANN's scheme: post the halo, compute while it travels, then the boundary.
//
// A rank's output rows split along the one axis whose rows move into the *boundary* (the rows
// that read a neighbour's rows) and the *interior* (the rest). The layer's own kernel runs on the
// whole window while the halo travels, its halo rows zero; the boundary rows it gets wrong are
// then computed again by small kernels on the boundary windows, once the halo is in:
// - forward: the boundary outputs overwrite the whole kernel's;
// - backward data: the boundary kernels run first, so the halo's gradient (which only boundary
//   outputs reach) is sent while the whole kernel computes the window's gradient;
// - weight gradient, bilinear in the input: the whole kernel on the window with zero halo, plus
//   the boundary kernels on the boundary windows with only their halo rows (own rows zero).
// The boundary is computed twice, so by default a boundary of more than 1/32 of the output rows
// (smaller blocks) runs exchange-then-compute instead, as do splits whose rows move along two or
// three axes.
#pragma once
#include <array>
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
  // "overlapped: the interior rows [1, 15) of [0, 16) along depth": for profiles.
  const std::string& description() const { return description_; }

  // `window`: the gathered window (halo in), in the source block layout; `dst`: the output block,
  // whose boundary rows are overwritten.
  void forward(const void* window, const void* weights, const void* bias, void* dst, void* scratch);
  // Writes the window gradient's halo rows (the neighbours' rows) into `window_grad`.
  void backward_halo(const void* diff_dst, const void* weights, void* window_grad, void* scratch);
  // Adds the halo rows' part of the weight gradient into `diff_weights`.
  void add_halo_weight_grad(const void* window, const void* diff_dst, void* diff_weights,
                            void* scratch);

  struct Side;

 private:
  ConvBoundaries() = default;
  std::unique_ptr<Side> make_side(Backend& backend, const Layer& layer, IndexRange out,
                                  IndexRange halo);
  std::vector<std::unique_ptr<Side>> sides_;  // lower and/or upper
  std::vector<int64_t> window_dims_, dst_dims_;
  int window_dim_ = 0, dst_dim_ = 0;  // the moving axis in them
  int64_t window_origin_ = 0, dst_origin_ = 0;
  int64_t weight_count_ = 0;
  DType dtype_ = DType::f32;
  size_t scratch_bytes_ = 0;
  std::string description_;
};

}  // namespace crest
