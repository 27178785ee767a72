// The boundary of a split window layer (convolution or pooling) cut into pieces, so that the
// layer computes while its halo travels (halo_overlap.hpp): which of a rank's outputs read a
// neighbour's rows, the disjoint pieces that cover them, each piece's window and padding, and the
// boxes that move data between the layer's window and output block and a piece's own arrays.
//
// Along each axis whose rows move, a rank's output rows split into the *boundary* (the rows that
// read a neighbour's rows) and the *interior*; split along two or three axes the boundary is a
// shell. It is cut into one piece per axis and end: along axis a the boundary rows, along the
// axes before a their interior rows only (the corners belong to the earlier axis's piece), along
// the axes after a every row. Each piece reads the window its outputs read, halo rows of the
// other axes included.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crest/core/box_copy.hpp"
#include "crest/core/tensor.hpp"
#include "crest/graph/window_axis.hpp"
#include "crest/spatial/decomposition.hpp"
#include "crest/spatial/halo_exchange.hpp"

namespace crest {

// dist.halo_overlap: auto (overlap where the boundary is at most 1/32 of the outputs), always
// (wherever the interior is not empty: what the tests use to reach every case), off.
enum class HaloOverlapMode { off, automatic, always };

// A block's dims as stored: [n, channels, rows...] plain, [n, rows..., channels] channels-last;
// and the dim of spatial axis `axis` in it.
std::vector<int64_t> block_dims(int64_t n, int64_t channels, const std::vector<int64_t>& rows,
                                Layout layout);
int spatial_dim(int axis, Layout layout);

// A box of a dense array: its first index and extent per dim.
struct ArrayBox {
  std::vector<int64_t> start, count;
};
// dst's box `to` (op)= src's box `from` (box_transfer).
void move_box(const void* src, const std::vector<int64_t>& src_dims, const ArrayBox& from,
              void* dst, const std::vector<int64_t>& dst_dims, const ArrayBox& to, DType dtype,
              BoxOp op);
size_t dense_bytes(const std::vector<int64_t>& dims, DType dtype);

// What a split layer gives its boundary kernels: the whole layer, this rank's kernel descriptor
// (`local`), the halo exchange of its input and the block layouts.
template <typename Desc>
struct SplitWindowLayer {
  const Desc& global;
  const Desc& local;
  const HaloExchange& halo;
  Layout src_layout, dst_layout;
};

class BoundaryPieces {
 public:
  // What the layer gives: the whole layer's windows, the halo exchange of its input, the block
  // layouts, and its local extents (batch, input and output channels, output rows per axis).
  struct Layer {
    std::vector<WindowAxis> windows;
    const HaloExchange& halo;
    Layout src_layout, dst_layout;
    int64_t n = 1, in_channels = 1, out_channels = 1;
    std::vector<int64_t> out_rows;
  };
  // A moving axis: its spatial axis, its dim in the window and in the output block, and this
  // rank's rows along it (the window's, the owned outputs', and its own within the window).
  struct Axis {
    int spatial = 0, src_dim = 0, dst_dim = 0;
    IndexRange window, owned_out, own_in;
  };
  struct Piece {
    std::vector<IndexRange> out, window;         // global rows per moving axis
    std::vector<LocalPadding> pad;               // the piece kernel's padding per moving axis
    std::vector<int64_t> window_dims, out_dims;  // its own arrays, in the block layouts
    // Its window in the layer's window and in its own array, this rank's own rows in the latter,
    // and its output in its own array and in the output block.
    ArrayBox in_window, window_box, own_rows, out_box, in_dst;
  };

  // Null, with why in `why_not`, where the layer cannot overlap: dist.halo_overlap off, no halo,
  // a rank without interior along some axis, a boundary above auto's share, or a piece whose
  // window would need negative padding (transposed).
  static std::unique_ptr<BoundaryPieces> make(const Layer& layer, HaloOverlapMode mode,
                                              std::string& why_not);
  // The same for a convolution's or a pooling's layer (`in_channels`, `out_channels` its own).
  template <typename Desc>
  static std::unique_ptr<BoundaryPieces> make(const SplitWindowLayer<Desc>& l, int64_t in_channels,
                                              int64_t out_channels, HaloOverlapMode mode,
                                              std::string& why_not) {
    const auto& out = l.local.out_size;
    return make(
        {window_axes(l.global), l.halo, l.src_layout, l.dst_layout, l.local.n, in_channels,
         out_channels, std::vector<int64_t>(out.begin(), out.begin() + l.local.spatial_rank)},
        mode, why_not);
  }

  const std::vector<Axis>& axes() const { return axes_; }
  const std::vector<Piece>& pieces() const { return pieces_; }
  const std::vector<int64_t>& window_dims() const { return window_dims_; }
  const std::vector<int64_t>& dst_dims() const { return dst_dims_; }
  // "overlapped: the interior rows [1, 15) of [0, 16) along depth ...": for profiles.
  const std::string& description() const { return description_; }

  // Moving piece i's data between the layer's arrays and the piece's own: its window cut from
  // the layer's window, its output written into the output block, its output's gradient cut
  // from the block's, its window's gradient added into the layer's window gradient.
  void window_in(size_t i, const void* window, void* piece_window, DType dtype) const;
  void out_to(size_t i, const void* piece_out, void* dst, DType dtype) const;
  void out_in(size_t i, const void* diff_dst, void* piece_out, DType dtype) const;
  void window_add(size_t i, const void* piece_window, void* window_grad, DType dtype) const;

  // A layer descriptor (ConvDesc, PoolDesc) cut to piece `p`: its extents and padding.
  template <typename Desc>
  Desc cut(Desc local, const Piece& p) const {
    for (size_t i = 0; i < axes_.size(); ++i) {
      const auto a = static_cast<size_t>(axes_[i].spatial);
      local.in_size[a] = p.window[i].size();
      local.out_size[a] = p.out[i].size();
      local.pad_lo[a] = p.pad[i].lo;
      local.pad_hi[a] = p.pad[i].hi;
    }
    return local;
  }

 private:
  BoundaryPieces() = default;
  std::vector<Axis> axes_;
  std::vector<Piece> pieces_;
  std::vector<int64_t> window_dims_, dst_dims_;
  std::string description_;
};

}  // namespace crest
