// One rank's part of a spatially split convolution or pooling layer: the backend's own kernel run
// on the rank's input window (owned rows plus halo, HaloExchange), producing the output rows the
// rank owns. Tensors given and returned are the rank's owned parts, plain layout
// ([n, c, spatial...]); where the backend's kernel prefers another format the part reorders.
//
// Forward gathers the window; backward_data returns the window's gradient to its owners;
// backward_weights gathers the window again (the weight gradient needs the rows the halo brings).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/graph/window_axis.hpp"
#include "crest/spatial/decomposition.hpp"
#include "crest/spatial/halo_exchange.hpp"
#include "crest/spatial/halo_overlap.hpp"
#include "crest/spatial/pool_boundaries.hpp"

namespace crest {

// How a split convolution's input gradient reaches the rows' owners: by default from the output
// gradient's halo (conv_data_gradient.hpp), which computes only the owned rows, where the split
// allows; or the window's gradient computed and its halo rows returned and summed (the only
// scheme pooling has; the tests run both).
enum class DataGradHalo { output_gradient, return_window };

// Where a split layer runs: the spatial group (ranks numbered as `grid`), the layer's name for
// messages, whether a convolution overlaps its halo exchange with compute (halo_overlap.hpp),
// where its exchanges' times are added (null: not timed), and how its input gradient moves.
struct SpatialPlacement {
  Communicator* group = nullptr;
  SpatialGrid grid;
  std::string layer;
  HaloOverlapMode overlap = HaloOverlapMode::automatic;
  HaloTiming* timing = nullptr;
  DataGradHalo data_grad = DataGradHalo::output_gradient;
};

// "depth", "height", "width" for 3-D data, the last two for 2-D, "width" for 1-D.
std::string spatial_axis_name(int spatial_rank, int axis);

// The plans of this rank (the group's grid coordinates) along each axis; refuses a split the
// layer cannot take (plan_axis).
std::vector<AxisPlan> plan_window(const std::vector<WindowAxis>& axes,
                                  const SpatialPlacement& where);

// The halo exchange that gathers the windows of `plans` from owned blocks [n, channels, rows...]
// kept in `layout`, timed into where.timing; `what` names it in error messages, `channel` as
// HaloExchange's.
std::unique_ptr<HaloExchange> make_halo(const SpatialPlacement& where,
                                        const std::vector<AxisPlan>& plans, int64_t n,
                                        int64_t channels, DType dtype, Layout layout,
                                        const std::string& what, int channel = 0);

// A tensor in the kernel's format and in plain layout, with the reorders between them (none when
// the kernel works in plain layout). The kernel-format copy lives in the caller's scratch.
class FormatBridge {
 public:
  // `block`: the layout the caller's side is in (plain or channels-last).
  FormatBridge(Backend& backend, const MemFormat& kernel_format, Layout block);
  // The kernel-format copy's size; 0 when the kernel works in plain layout.
  size_t bytes() const { return bytes_; }
  // Plain data in the kernel's format (in `buf`, or `plain` itself when no reorder is needed).
  const void* to_kernel(const void* plain, void* buf);
  // Where the kernel writes; then to_plain copies it out.
  void* kernel_buffer(void* plain, void* buf) { return in_ ? buf : plain; }
  void to_plain(const void* buf, void* plain);

 private:
  std::unique_ptr<ReorderKernel> in_, out_;
  size_t bytes_ = 0;
};

// The transient memory of a split layer's call, carved from the executor's scratch: the window
// (or its gradient) in the block's layout, the kernel-format copies of the window and of the
// output, the kernel's own scratch, and the boundary kernels' memory where the exchange overlaps
// compute. Nothing is kept between calls, so a split
// program holds no more than its arena and one such region.
class WindowScratch {
 public:
  struct Slices {
    std::byte *window, *src, *dst, *kernel, *boundaries;
  };
  WindowScratch() = default;
  WindowScratch(size_t window, size_t src, size_t dst, size_t kernel, size_t boundaries = 0);
  size_t bytes() const { return offset_[5]; }
  Slices at(void* scratch) const;

 private:
  size_t offset_[6] = {0, 0, 0, 0, 0, 0};
};

// One split layer's parts every kind needs: the plans, the halo exchange, the bridges between the
// plain blocks and the kernel's formats, and the scratch layout.
struct WindowPart {
  SpatialPlacement where;
  std::unique_ptr<HaloExchange> halo;
  std::unique_ptr<FormatBridge> src, dst;
  WindowScratch scratch;
  Layout src_layout = Layout::plain, dst_layout = Layout::plain;  // of the blocks
  Shape owned_src{}, owned_dst{};  // this rank's input and output blocks, [n, c, rows...]
  MemFormat src_block(DType dtype) const { return plain_format(owned_src, dtype, src_layout); }
  MemFormat dst_block(DType dtype) const { return plain_format(owned_dst, dtype, dst_layout); }
  const HaloExchange& exchange() const { return *halo; }
  // The kernel's input: the window gathered into m.window, or the owned block itself where no
  // rows move (HaloExchange::moves_rows).
  const void* window_of(const void* owned, const WindowScratch::Slices& m) const;
  // Where the kernel writes the window's gradient (m.window, or the owned gradient itself), and
  // then its return to the rows' owners (nothing to return where no rows move).
  void* window_grad_into(void* owned_grad, const WindowScratch::Slices& m) const;
  void return_window_grad(void* owned_grad, const WindowScratch::Slices& m) const;
};

// Whether a kernel runs oneDNN's reference code ("ref:" in its implementation()): far slower
// than the whole layer's kernel on the small, oddly padded problems a split makes (a boundary
// window, a data-gradient window), so a split does without those kernels where it can.
bool runs_reference_code(const ConvKernel& kernel);

class ConvDataGradient;

// ConvDataGradient's scratch: the output gradient's window (alive from its start() to its
// finish()) and its working memory (used inside finish() alone).
struct DataGradScratch {
  void* window;
  void* work;
};

class SpatialConv {
 public:
  // `global`: the whole convolution (the sample's extents), transposed or not: a transposed one
  // reads the input rows that write its output rows (decomposition.hpp, rows_read) and crops
  // the rest with its padding.
  // Blocks are plain, or channels-last where `preferred` says so and the backend's kernel works
  // in it (then no reorder runs around the kernel).
  SpatialConv(Backend& backend, const ConvDesc& global, SpatialPlacement where,
              Layout preferred = Layout::plain);
  ~SpatialConv();

  const ConvDesc& local() const { return local_; }
  const SpatialPlacement& placement() const { return part_.where; }
  std::string implementation() const { return kernel_->implementation(); }
  // This rank's input and output blocks as the calls take them.
  MemFormat src_block_format() const { return part_.src_block(local_.dtype); }
  MemFormat dst_block_format() const { return part_.dst_block(local_.dtype); }
  size_t scratch_bytes() const;
  const HaloExchange& halo() const { return part_.exchange(); }
  // Whether the halo exchange overlaps compute, and how or why not (ConvBoundaries).
  bool overlapped() const { return boundaries_ != nullptr; }
  const std::string& overlap_note() const { return overlap_note_; }
  // Whether the input gradient comes from the output gradient's halo (ConvDataGradient), and
  // why not where it does not.
  bool data_grad_from_output() const { return data_grad_ != nullptr; }
  const std::string& data_grad_note() const { return data_grad_note_; }
  // What this rank's backward receives per step: the output gradient's halo (or the gradients
  // of the rows its neighbours gathered), plus the window gathered again for the weights.
  size_t backward_halo_bytes() const;

  // `scratch`: scratch_bytes() bytes, 64-byte aligned, used during the call only (but between
  // backward_weights and backward_data, below).
  void forward(const void* src, const void* weights, const void* bias, void* dst, void* scratch);
  void backward_data(const void* diff_dst, const void* weights, void* diff_src, void* scratch);
  // This rank's share of the weight (and bias) gradient: their sum over the group is the whole
  // sample's. Gathers the window from `src` again (a second halo exchange instead of keeping a
  // window per layer from forward to backward). Where the input gradient comes from the output
  // gradient's halo, that halo is posted first (unless dist.halo_overlap is off) and travels while
  // the weight gradient computes:
  // a backward_data with the same `diff_dst` and `scratch` then finishes it (as ConvLayer calls
  // them; called the other way round, backward_data runs whole and the halo posted after it goes
  // unused, waited for at the next backward_weights or when the layer ends).
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch);

 private:
  void forward_overlapped(const void* src, const void* weights, const void* bias, void* dst,
                          const WindowScratch::Slices& m);
  void backward_data_overlapped(const void* diff_dst, const void* weights, void* diff_src,
                                const WindowScratch::Slices& m);
  void backward_weights_overlapped(const void* src, const void* diff_dst, void* diff_weights,
                                   void* diff_bias, const WindowScratch::Slices& m);

  ConvDesc local_;
  std::unique_ptr<ConvKernel> kernel_;
  WindowPart part_;
  std::unique_ptr<ConvBoundaries> boundaries_;  // null: exchange, then compute
  std::string overlap_note_;
  // Whether backward_weights posts the output gradient's halo for backward_data.
  bool data_grad_early() const { return data_grad_ && part_.where.overlap != HaloOverlapMode::off; }
  // The scratch of the input gradient from the output gradient's halo: its window after the rest
  // (it outlives the weight gradient between backward_weights and backward_data), its working
  // memory over this layer's own region (used after the weight gradient's).
  DataGradScratch data_grad_scratch(void* scratch) const;
  size_t shared_bytes() const;  // the two regions the window follows

  std::unique_ptr<ConvDataGradient> data_grad_;           // null: the window's gradient returned
  std::unique_ptr<PendingCollective> pending_data_grad_;  // posted, not yet finished
  std::string data_grad_note_;
};

class SpatialPool {
 public:
  SpatialPool(Backend& backend, const PoolDesc& global, SpatialPlacement where,
              Layout preferred = Layout::plain);

  ~SpatialPool();

  const PoolDesc& local() const { return local_; }
  MemFormat src_block_format() const { return part_.src_block(local_.dtype); }
  MemFormat dst_block_format() const { return part_.dst_block(local_.dtype); }
  // Kept from forward to backward (max pooling's indices, the boundary pieces' after the whole
  // kernel's), and transient per call.
  size_t workspace_bytes() const;
  size_t scratch_bytes() const { return part_.scratch.bytes(); }
  const HaloExchange& halo() const { return part_.exchange(); }
  // Whether the halo exchange overlaps compute, and how or why not (PoolBoundaries).
  bool overlapped() const { return boundaries_ != nullptr; }
  const std::string& overlap_note() const { return overlap_note_; }

  void forward(const void* src, void* dst, void* workspace, void* scratch);
  void backward(const void* diff_dst, const void* workspace, void* diff_src, void* scratch);

 private:
  void forward_overlapped(const void* src, void* dst, void* workspace,
                          const WindowScratch::Slices& m);
  void backward_overlapped(const void* diff_dst, const void* workspace, void* diff_src,
                           const WindowScratch::Slices& m);
  // Where the boundary pieces' workspaces start in the layer's.
  size_t pieces_workspace_at() const { return align_up(kernel_->workspace_bytes(), 256); }

  PoolDesc local_;
  std::unique_ptr<PoolKernel> kernel_;
  WindowPart part_;
  std::unique_ptr<PoolBoundaries> boundaries_;  // null: exchange, then compute
  std::string overlap_note_;
};

}  // namespace crest
