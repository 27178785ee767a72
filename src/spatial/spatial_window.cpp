// SpatialConv and SpatialPool (spatial_window.hpp): the global descriptor cut down to this rank's
// window, the backend's kernel on it, and the halo exchange around it.
#include "crest/spatial/spatial_window.hpp"

#include <algorithm>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/spatial/conv_data_gradient.hpp"

namespace crest {
namespace {

// The descriptor's extents and padding cut down to this rank's plans.
template <typename Desc>
void localise(Desc& d, const std::vector<AxisPlan>& plans) {
  for (size_t i = 0; i < plans.size(); ++i) {
    d.in_size[i] = plans[i].window.size();
    d.out_size[i] = plans[i].owned_out.size();
    d.pad_lo[i] = plans[i].pad_lo;
    d.pad_hi[i] = plans[i].pad_hi;
  }
}

std::vector<int64_t> dims_of(int64_t n, int64_t channels, const std::array<int64_t, 3>& size,
                             int spatial_rank) {
  std::vector<int64_t> dims{n, channels};
  for (size_t i = 0; i < static_cast<size_t>(spatial_rank); ++i) dims.push_back(size[i]);
  return dims;
}

}  // namespace

std::unique_ptr<HaloExchange> make_halo(const SpatialPlacement& where,
                                        const std::vector<AxisPlan>& plans, int64_t n,
                                        int64_t channels, DType dtype, Layout layout,
                                        const std::string& what, int channel) {
  std::vector<int64_t> rows;
  std::vector<HaloExchange::Axis> axes;
  for (size_t i = 0; i < plans.size(); ++i) {
    rows.push_back(plans[i].owned_in.size());
    axes.push_back({spatial_dim(static_cast<int>(i), layout), plans[i]});
  }
  auto halo = std::make_unique<HaloExchange>(*where.group, where.grid,
                                             block_dims(n, channels, rows, layout), std::move(axes),
                                             dtype, what, channel);
  halo->set_timing(where.timing);
  return halo;
}

bool runs_reference_code(const ConvKernel& kernel) {
  return kernel.implementation().find("ref:") != std::string::npos;
}

std::string spatial_axis_name(int spatial_rank, int axis) {
  static const char* const names[] = {"depth", "height", "width"};
  return names[3 - spatial_rank + axis];
}

std::vector<AxisPlan> plan_window(const std::vector<WindowAxis>& axes,
                                  const SpatialPlacement& where) {
  if (where.grid.parts.size() != axes.size())
    throw_usage("dist.spatial: " + std::to_string(where.grid.parts.size()) +
                " parts given for layer '" + where.layer + "', which has " +
                std::to_string(axes.size()) + " spatial axes");
  const std::vector<int> coords = where.grid.coords(where.group->rank());
  std::vector<AxisPlan> plans;
  for (size_t i = 0; i < axes.size(); ++i)
    plans.push_back(
        plan_axis(axes[i], where.grid.parts[i], coords[i], where.layer,
                  spatial_axis_name(static_cast<int>(axes.size()), static_cast<int>(i))));
  return plans;
}

FormatBridge::FormatBridge(Backend& backend, const MemFormat& kernel_format, Layout block) {
  const MemFormat plain = plain_format(kernel_format.shape, kernel_format.dtype, block);
  if (kernel_format == plain) return;
  in_ = backend.reorder(plain, kernel_format);
  out_ = backend.reorder(kernel_format, plain);
  bytes_ = kernel_format.bytes;
}

const void* FormatBridge::to_kernel(const void* plain, void* buf) {
  if (!in_) return plain;
  in_->execute(plain, buf);
  return buf;
}

void FormatBridge::to_plain(const void* buf, void* plain) {
  if (out_) out_->execute(buf, plain);
}

WindowScratch::WindowScratch(size_t window, size_t src, size_t dst, size_t kernel,
                             size_t boundaries) {
  const size_t sizes[] = {window, src, dst, kernel, boundaries};
  for (size_t i = 0; i < 5; ++i) offset_[i + 1] = offset_[i] + align_up(sizes[i], 256);
}

WindowScratch::Slices WindowScratch::at(void* scratch) const {
  auto* base = static_cast<std::byte*>(scratch);
  return {base + offset_[0], base + offset_[1], base + offset_[2], base + offset_[3],
          base + offset_[4]};
}

namespace {

// The layout a block is kept in: channels-last where the caller prefers it (the compiled program
// does) and the backend's kernel works in a format of its own (channels-last or blocked: a
// reorder runs around a blocked one), else plain (a backend whose kernels work in plain layout,
// as the reference backend's, keeps every layer in it). The layers between the split
// convolutions then get channels-last blocks, not plain ones: oneDNN's batch norm runs its JIT
// code on those and its generic code on plain ones (DeepCAM's split step, 192x288 on 2 ranks:
// 87 against 345 ms of batch norm).
Layout block_layout(Layout preferred, const MemFormat& kernel_format) {
  return preferred == Layout::channels_last && kernel_format.layout != Layout::plain
             ? Layout::channels_last
             : Layout::plain;
}

// The halo messages carry rows in the blocks' layout (the input's forward, the output
// gradient's backward), so every rank of the group must keep the same one; a backend may pick
// different kernels for the windows of one layer (oneDNN: channels-last brgconv for one window
// depth, blocked nCdhw8c for another). Plain where any rank's is (collective over the group, at
// compile time).
Layout agreed_layout(Communicator& group, Layout mine) {
  const double any_plain = group.allreduce_max(mine == Layout::plain ? 1.0 : 0.0);
  return any_plain > 0 ? Layout::plain : mine;
}

// The halo exchange, the bridges and the scratch of a kernel made on this rank's window.
template <typename Kernel>
WindowPart window_part(Backend& backend, SpatialPlacement where, const std::vector<AxisPlan>& plans,
                       int64_t n, int64_t channels, DType dtype, const Kernel& kernel,
                       Layout preferred) {
  WindowPart part{std::move(where), nullptr, nullptr, nullptr, {}, Layout::plain, Layout::plain};
  Communicator& group = *part.where.group;
  part.src_layout = agreed_layout(group, block_layout(preferred, kernel.src_format()));
  part.dst_layout = agreed_layout(group, block_layout(preferred, kernel.dst_format()));
  part.halo = make_halo(part.where, plans, n, channels, dtype, part.src_layout,
                        "layer '" + part.where.layer + "'");
  part.src = std::make_unique<FormatBridge>(backend, kernel.src_format(), part.src_layout);
  part.dst = std::make_unique<FormatBridge>(backend, kernel.dst_format(), part.dst_layout);
  part.scratch = WindowScratch(part.halo->moves_rows() ? part.halo->window_bytes() : 0,
                               part.src->bytes(), part.dst->bytes(), kernel.scratch_bytes());
  return part;
}

}  // namespace

namespace {

// [n, channels, rows per axis]: the window's rows, or the owned input's.
Shape rows_shape(int64_t n, int64_t channels, const std::vector<AxisPlan>& plans,
                 IndexRange AxisPlan::*rows) {
  std::vector<int64_t> dims{n, channels};
  for (const AxisPlan& p : plans) dims.push_back((p.*rows).size());
  return Shape(dims);
}

}  // namespace

// --- SpatialConv ---------------------------------------------------------------------------

SpatialConv::SpatialConv(Backend& backend, const ConvDesc& global, SpatialPlacement where,
                         Layout preferred)
    : local_(global) {
  const std::vector<AxisPlan> plans = plan_window(window_axes(global), where);
  localise(local_, plans);
  const Shape window = rows_shape(global.n, global.in_channels, plans, &AxisPlan::window);
  kernel_ = backend.conv(local_, plain_format(window, local_.dtype, preferred));
  part_ = window_part(backend, std::move(where), plans, global.n, global.in_channels, global.dtype,
                      *kernel_, preferred);
  part_.owned_src = rows_shape(global.n, global.in_channels, plans, &AxisPlan::owned_in);
  part_.owned_dst =
      Shape(dims_of(local_.n, local_.out_channels, local_.out_size, local_.spatial_rank));
  boundaries_ = ConvBoundaries::make(
      backend, {global, local_, *part_.halo, part_.src_layout, part_.dst_layout},
      part_.where.overlap, overlap_note_);
  if (part_.where.data_grad == DataGradHalo::output_gradient)
    data_grad_ = ConvDataGradient::make(backend, global, *kernel_, part_, data_grad_note_);
  else
    data_grad_note_ = "the window's gradient returned (asked for)";
  if (data_grad_)
    data_grad_note_ = std::string("from the output gradient's halo, exchanged ") +
                      (data_grad_early() ? "while the weight gradient computes"
                                         : "before its kernel (dist.halo_overlap off)");
  if (!boundaries_) return;
  overlap_note_ = boundaries_->description();
  const HaloExchange& h = *part_.halo;
  part_.scratch = WindowScratch(h.window_bytes(), part_.src->bytes(), part_.dst->bytes(),
                                kernel_->scratch_bytes(), boundaries_->scratch_bytes());
}

// An output-gradient halo still posted (a backward_weights no backward_data followed) is waited
// for: its buffers belong to this layer. A destructor cannot throw; a failed exchange has already
// failed the neighbours' waits and ends the job through them.
SpatialConv::~SpatialConv() {
  if (!pending_data_grad_) return;
  try {
    pending_data_grad_->wait();
  } catch (...) {
  }
}

// With the input gradient from the output gradient's halo: [the larger of this layer's region and
// the data gradient's working memory][the output gradient's window]. The window outlives the
// weight gradient (its halo travels meanwhile); the working memory is used only after it.
size_t SpatialConv::scratch_bytes() const {
  const size_t rest = align_up(part_.scratch.bytes(), 256);
  if (!data_grad_) return rest;
  return shared_bytes() + data_grad_->window_bytes();
}

size_t SpatialConv::shared_bytes() const {
  return align_up(std::max(part_.scratch.bytes(), data_grad_->work_bytes()), 256);
}

DataGradScratch SpatialConv::data_grad_scratch(void* scratch) const {
  return {static_cast<std::byte*>(scratch) + shared_bytes(), scratch};
}

size_t SpatialConv::backward_halo_bytes() const {
  const HaloExchange& h = *part_.halo;
  // Received: the output gradient's halo, or the gradients of the rows the neighbours gathered.
  const size_t data =
      data_grad_ ? data_grad_->halo().gather_received_bytes() : h.gather_sent_bytes();
  return data + h.gather_received_bytes();
}

const void* WindowPart::window_of(const void* owned, const WindowScratch::Slices& m) const {
  if (!halo->moves_rows()) return owned;
  halo->gather(owned, m.window);
  return m.window;
}

void* WindowPart::window_grad_into(void* owned_grad, const WindowScratch::Slices& m) const {
  return halo->moves_rows() ? m.window : owned_grad;
}

void WindowPart::return_window_grad(void* owned_grad, const WindowScratch::Slices& m) const {
  if (halo->moves_rows()) halo->scatter_add(m.window, owned_grad);
}

void SpatialConv::forward(const void* src, const void* weights, const void* bias, void* dst,
                          void* scratch) {
  const auto m = part_.scratch.at(scratch);
  if (boundaries_) return forward_overlapped(src, weights, bias, dst, m);
  kernel_->forward(part_.src->to_kernel(part_.window_of(src, m), m.src), weights, bias,
                   part_.dst->kernel_buffer(dst, m.dst), m.kernel);
  part_.dst->to_plain(m.dst, dst);
}

void SpatialConv::backward_data(const void* diff_dst, const void* weights, void* diff_src,
                                void* scratch) {
  if (pending_data_grad_) {
    const auto pending = std::move(pending_data_grad_);
    return data_grad_->finish(*pending, weights, diff_src, data_grad_scratch(scratch));
  }
  if (data_grad_) return data_grad_->run(diff_dst, weights, diff_src, data_grad_scratch(scratch));
  const auto m = part_.scratch.at(scratch);
  if (boundaries_) return backward_data_overlapped(diff_dst, weights, diff_src, m);
  void* window_grad = part_.window_grad_into(diff_src, m);
  kernel_->backward_data(part_.dst->to_kernel(diff_dst, m.dst), weights,
                         part_.src->kernel_buffer(window_grad, m.src), m.kernel);
  part_.src->to_plain(m.src, window_grad);
  part_.return_window_grad(diff_src, m);
}

void SpatialConv::backward_weights(const void* src, const void* diff_dst, void* diff_weights,
                                   void* diff_bias, void* scratch) {
  if (data_grad_early()) {
    if (pending_data_grad_) std::exchange(pending_data_grad_, nullptr)->wait();  // not finished
    pending_data_grad_ = data_grad_->start(diff_dst, data_grad_scratch(scratch).window);
  }
  const auto m = part_.scratch.at(scratch);
  if (boundaries_) return backward_weights_overlapped(src, diff_dst, diff_weights, diff_bias, m);
  kernel_->backward_weights(part_.src->to_kernel(part_.window_of(src, m), m.src),
                            part_.dst->to_kernel(diff_dst, m.dst), diff_weights, diff_bias,
                            m.kernel);
}

// The whole kernel runs on the window while the halo travels (its halo rows zero, so the rows
// computed from them are wrong and finite); the boundary kernels then redo those rows.
void SpatialConv::forward_overlapped(const void* src, const void* weights, const void* bias,
                                     void* dst, const WindowScratch::Slices& m) {
  HaloExchange& h = *part_.halo;
  h.zero_received_rows(m.window);
  auto pending = h.start_gather(src, m.window);
  kernel_->forward(part_.src->to_kernel(m.window, m.src), weights, bias,
                   part_.dst->kernel_buffer(dst, m.dst), m.kernel);
  part_.dst->to_plain(m.dst, dst);
  h.finish_gather(*pending, m.window);
  boundaries_->forward(m.window, weights, bias, dst, m.boundaries);
}

// The halo's gradient first (only boundary outputs reach it), sent while the whole kernel
// computes the window's gradient; its own rows are then summed with what comes back.
void SpatialConv::backward_data_overlapped(const void* diff_dst, const void* weights,
                                           void* diff_src, const WindowScratch::Slices& m) {
  HaloExchange& h = *part_.halo;
  boundaries_->backward_halo(diff_dst, weights, m.window, m.boundaries);
  auto pending = h.start_return(m.window);
  kernel_->backward_data(part_.dst->to_kernel(diff_dst, m.dst), weights,
                         part_.src->kernel_buffer(m.window, m.src), m.kernel);
  part_.src->to_plain(m.src, m.window);
  h.finish_return(*pending, m.window, diff_src);
}

// The weight gradient is bilinear in the input: the whole kernel on the window with zero halo,
// plus the boundary kernels on the halo rows alone.
void SpatialConv::backward_weights_overlapped(const void* src, const void* diff_dst,
                                              void* diff_weights, void* diff_bias,
                                              const WindowScratch::Slices& m) {
  HaloExchange& h = *part_.halo;
  h.zero_received_rows(m.window);
  auto pending = h.start_gather(src, m.window);
  kernel_->backward_weights(part_.src->to_kernel(m.window, m.src),
                            part_.dst->to_kernel(diff_dst, m.dst), diff_weights, diff_bias,
                            m.kernel);
  h.finish_gather(*pending, m.window);
  boundaries_->add_halo_weight_grad(m.window, diff_dst, diff_weights, m.boundaries);
}

// --- SpatialPool ---------------------------------------------------------------------------

SpatialPool::SpatialPool(Backend& backend, const PoolDesc& global, SpatialPlacement where,
                         Layout preferred)
    : local_(global) {
  const std::vector<AxisPlan> plans = plan_window(window_axes(global), where);
  localise(local_, plans);
  const Shape window = rows_shape(global.n, global.channels, plans, &AxisPlan::window);
  kernel_ = backend.pool(local_, plain_format(window, local_.dtype, preferred));
  part_ = window_part(backend, std::move(where), plans, global.n, global.channels, global.dtype,
                      *kernel_, preferred);
  part_.owned_src = rows_shape(global.n, global.channels, plans, &AxisPlan::owned_in);
  part_.owned_dst = Shape(dims_of(local_.n, local_.channels, local_.out_size, local_.spatial_rank));
  boundaries_ = PoolBoundaries::make(
      backend, {global, local_, *part_.halo, part_.src_layout, part_.dst_layout},
      part_.where.overlap, overlap_note_);
  if (!boundaries_) return;
  overlap_note_ = boundaries_->description();
  part_.scratch = WindowScratch(part_.halo->window_bytes(), part_.src->bytes(), part_.dst->bytes(),
                                kernel_->scratch_bytes(), boundaries_->scratch_bytes());
}

SpatialPool::~SpatialPool() = default;

size_t SpatialPool::workspace_bytes() const {
  return boundaries_ ? pieces_workspace_at() + boundaries_->workspace_bytes()
                     : kernel_->workspace_bytes();
}

void SpatialPool::forward(const void* src, void* dst, void* workspace, void* scratch) {
  const auto m = part_.scratch.at(scratch);
  if (boundaries_) return forward_overlapped(src, dst, workspace, m);
  kernel_->forward(part_.src->to_kernel(part_.window_of(src, m), m.src),
                   part_.dst->kernel_buffer(dst, m.dst), workspace, m.kernel);
  part_.dst->to_plain(m.dst, dst);
}

void SpatialPool::backward(const void* diff_dst, const void* workspace, void* diff_src,
                           void* scratch) {
  const auto m = part_.scratch.at(scratch);
  if (boundaries_) return backward_overlapped(diff_dst, workspace, diff_src, m);
  void* window_grad = part_.window_grad_into(diff_src, m);
  kernel_->backward(part_.dst->to_kernel(diff_dst, m.dst), workspace,
                    part_.src->kernel_buffer(window_grad, m.src), m.kernel);
  part_.src->to_plain(m.src, window_grad);
  part_.return_window_grad(diff_src, m);
}

// The whole kernel runs on the window while the halo travels (its halo rows zero, so the boundary
// outputs and their workspace entries are wrong); the pieces then redo those outputs, each with
// a workspace of its own.
void SpatialPool::forward_overlapped(const void* src, void* dst, void* workspace,
                                     const WindowScratch::Slices& m) {
  HaloExchange& h = *part_.halo;
  h.zero_received_rows(m.window);
  auto pending = h.start_gather(src, m.window);
  kernel_->forward(part_.src->to_kernel(m.window, m.src), part_.dst->kernel_buffer(dst, m.dst),
                   workspace, m.kernel);
  part_.dst->to_plain(m.dst, dst);
  h.finish_gather(*pending, m.window);
  boundaries_->forward(m.window, dst, static_cast<std::byte*>(workspace) + pieces_workspace_at(),
                       m.boundaries);
}

// The boundary's share of the window gradient first (it holds the halo rows' whole gradient),
// sent while the whole kernel computes the interior's share; the two add up to the window's.
void SpatialPool::backward_overlapped(const void* diff_dst, const void* workspace, void* diff_src,
                                      const WindowScratch::Slices& m) {
  HaloExchange& h = *part_.halo;
  const void* boundary = boundaries_->boundary_window_grad(
      diff_dst, static_cast<const std::byte*>(workspace) + pieces_workspace_at(), m.boundaries);
  auto pending = h.start_return(boundary);
  const void* interior = boundaries_->interior_grad(diff_dst, m.boundaries);
  kernel_->backward(part_.dst->to_kernel(interior, m.dst), workspace,
                    part_.src->kernel_buffer(m.window, m.src), m.kernel);
  part_.src->to_plain(m.src, m.window);
  const std::vector<int64_t>& dims = h.window_dims();
  const ArrayBox whole{std::vector<int64_t>(dims.size(), 0), dims};
  move_box(boundary, dims, whole, m.window, dims, whole, local_.dtype, BoxOp::add);
  h.finish_return(*pending, m.window, diff_src);
}

}  // namespace crest
