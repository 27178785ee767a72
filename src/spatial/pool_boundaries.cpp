// PoolBoundaries (pool_boundaries.hpp): a split pooling layer's boundary pieces, their kernels
// and workspaces.
#include "crest/spatial/pool_boundaries.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "crest/spatial/spatial_window.hpp"

namespace crest {

// One piece's kernel, where its workspace lies in the layer's, and the layout of its transient
// memory (piece window, piece output, the kernel-format copies of both, the kernel's scratch).
struct PoolBoundaries::Kernel {
  std::unique_ptr<PoolKernel> kernel;
  std::unique_ptr<FormatBridge> src, dst;
  size_t workspace_at = 0;
  std::array<size_t, 6> offset{};
  struct Slices {
    std::byte *window, *out, *src, *dst, *kernel;
  };
  Slices at(void* scratch) const {
    auto* b = static_cast<std::byte*>(scratch);
    return {b + offset[0], b + offset[1], b + offset[2], b + offset[3], b + offset[4]};
  }
};

PoolBoundaries::~PoolBoundaries() = default;

namespace {

std::vector<int64_t> extents(const std::array<int64_t, 3>& size, int spatial_rank) {
  return std::vector<int64_t>(size.begin(), size.begin() + spatial_rank);
}

}  // namespace

std::unique_ptr<PoolBoundaries> PoolBoundaries::make(Backend& backend, const Layer& l,
                                                     HaloOverlapMode mode, std::string& why_not) {
  const PoolDesc& local = l.local;
  auto pieces = BoundaryPieces::make(l, local.channels, local.channels, mode, why_not);
  if (!pieces) return nullptr;
  std::unique_ptr<PoolBoundaries> b(new PoolBoundaries());
  b->dtype_ = local.dtype;
  size_t transient = 0;
  for (const BoundaryPieces::Piece& p : pieces->pieces()) {
    const PoolDesc d = pieces->cut(local, p);
    auto k = std::make_unique<Kernel>();
    const Shape plain_window(
        block_dims(d.n, d.channels, extents(d.in_size, d.spatial_rank), Layout::plain));
    k->kernel = backend.pool(d, plain_format(plain_window, d.dtype, l.src_layout));
    k->src = std::make_unique<FormatBridge>(backend, k->kernel->src_format(), l.src_layout);
    k->dst = std::make_unique<FormatBridge>(backend, k->kernel->dst_format(), l.dst_layout);
    const size_t sizes[] = {dense_bytes(p.window_dims, d.dtype), dense_bytes(p.out_dims, d.dtype),
                            k->src->bytes(), k->dst->bytes(), k->kernel->scratch_bytes()};
    for (size_t i = 0; i < 5; ++i) k->offset[i + 1] = k->offset[i] + align_up(sizes[i], 256);
    transient = std::max(transient, k->offset[5]);
    k->workspace_at = b->workspace_bytes_;
    b->workspace_bytes_ += align_up(k->kernel->workspace_bytes(), 256);
    b->kernels_.push_back(std::move(k));
  }
  b->window_grad_at_ = transient;
  b->interior_at_ = transient + align_up(dense_bytes(pieces->window_dims(), b->dtype_), 256);
  b->scratch_bytes_ = b->interior_at_ + dense_bytes(pieces->dst_dims(), b->dtype_);
  b->pieces_ = std::move(pieces);
  return b;
}

void PoolBoundaries::forward(const void* window, void* dst, void* workspace, void* scratch) {
  for (size_t i = 0; i < kernels_.size(); ++i) {
    Kernel& k = *kernels_[i];
    const Kernel::Slices m = k.at(scratch);
    pieces_->window_in(i, window, m.window, dtype_);
    k.kernel->forward(k.src->to_kernel(m.window, m.src), k.dst->kernel_buffer(m.out, m.dst),
                      static_cast<std::byte*>(workspace) + k.workspace_at, m.kernel);
    k.dst->to_plain(m.dst, m.out);
    pieces_->out_to(i, m.out, dst, dtype_);
  }
}

const void* PoolBoundaries::boundary_window_grad(const void* diff_dst, const void* workspace,
                                                 void* scratch) {
  void* window_grad = static_cast<std::byte*>(scratch) + window_grad_at_;
  std::memset(window_grad, 0, dense_bytes(pieces_->window_dims(), dtype_));
  for (size_t i = 0; i < kernels_.size(); ++i) {
    Kernel& k = *kernels_[i];
    const Kernel::Slices m = k.at(scratch);
    pieces_->out_in(i, diff_dst, m.out, dtype_);
    k.kernel->backward(k.dst->to_kernel(m.out, m.dst),
                       static_cast<const std::byte*>(workspace) + k.workspace_at,
                       k.src->kernel_buffer(m.window, m.src), m.kernel);
    k.src->to_plain(m.src, m.window);
    pieces_->window_add(i, m.window, window_grad, dtype_);
  }
  return window_grad;
}

const void* PoolBoundaries::interior_grad(const void* diff_dst, void* scratch) const {
  const BoundaryPieces& g = *pieces_;
  void* interior = static_cast<std::byte*>(scratch) + interior_at_;
  std::memcpy(interior, diff_dst, dense_bytes(g.dst_dims(), dtype_));
  for (const BoundaryPieces::Piece& p : g.pieces())
    move_box(nullptr, g.dst_dims(), p.in_dst, interior, g.dst_dims(), p.in_dst, dtype_,
             BoxOp::zero);
  return interior;
}

}  // namespace crest
