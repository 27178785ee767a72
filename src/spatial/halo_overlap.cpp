// ConvBoundaries (halo_overlap.hpp): a split convolution's boundary pieces, their kernels, and
// the three passes over them.
#include "crest/spatial/halo_overlap.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "crest/core/error.hpp"
#include "crest/spatial/spatial_window.hpp"

namespace crest {

HaloOverlapMode parse_halo_overlap(const std::string& text, const std::string& key) {
  if (text == "auto") return HaloOverlapMode::automatic;
  if (text == "always") return HaloOverlapMode::always;
  if (text == "off") return HaloOverlapMode::off;
  throw_usage(key + ": '" + text + "' is not one of auto, always, off");
}

std::string halo_overlap_name(HaloOverlapMode mode) {
  switch (mode) {
    case HaloOverlapMode::off:
      return "off";
    case HaloOverlapMode::always:
      return "always";
    case HaloOverlapMode::automatic:
      break;
  }
  return "auto";
}

namespace {

void add_into(void* acc, const void* part, int64_t n, DType dtype) {
  if (dtype == DType::f64) {
    for (int64_t i = 0; i < n; ++i)
      static_cast<double*>(acc)[i] += static_cast<const double*>(part)[i];
    return;
  }
  CREST_CHECK(dtype == DType::f32, "split weight gradients are float32 or float64");
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(acc)[i] += static_cast<const float*>(part)[i];
}

std::vector<int64_t> extents(const std::array<int64_t, 3>& size, int spatial_rank) {
  return std::vector<int64_t>(size.begin(), size.begin() + spatial_rank);
}

}  // namespace

// One piece's kernel on its window and the layout of its transient memory (piece window, piece
// output, the kernel-format copies of both, the kernel's scratch, a weight gradient).
struct ConvBoundaries::Kernel {
  std::unique_ptr<ConvKernel> kernel;
  std::unique_ptr<FormatBridge> src, dst;
  std::array<size_t, 7> offset{};
  struct Slices {
    std::byte *window, *out, *src, *dst, *kernel, *dw;
  };
  Slices at(void* scratch) const {
    auto* b = static_cast<std::byte*>(scratch);
    return {b + offset[0], b + offset[1], b + offset[2],
            b + offset[3], b + offset[4], b + offset[5]};
  }
};

ConvBoundaries::~ConvBoundaries() = default;

std::unique_ptr<ConvBoundaries> ConvBoundaries::make(Backend& backend, const Layer& l,
                                                     HaloOverlapMode mode, std::string& why_not) {
  const ConvDesc& local = l.local;
  auto pieces = BoundaryPieces::make(l, local.in_channels, local.out_channels, mode, why_not);
  if (!pieces) return nullptr;
  std::unique_ptr<ConvBoundaries> b(new ConvBoundaries());
  b->dtype_ = local.dtype;
  b->weight_count_ = local.out_channels * local.in_channels / local.groups;
  for (int i = 0; i < local.spatial_rank; ++i) b->weight_count_ *= local.kernel[size_t(i)];
  for (const BoundaryPieces::Piece& p : pieces->pieces()) {
    ConvDesc d = pieces->cut(local, p);
    d.bias_grad = false;  // the whole kernel computes the bias gradient once
    auto k = std::make_unique<Kernel>();
    const Shape plain_window(
        block_dims(d.n, d.in_channels, extents(d.in_size, d.spatial_rank), Layout::plain));
    k->kernel = backend.conv(d, plain_format(plain_window, d.dtype, l.src_layout));
    // A boundary window is a small, oddly padded problem: where oneDNN has only its reference
    // code for it (a transposed convolution's weight gradient on DeepCAM's 2-row boundaries
    // took 2 s against 0.1 s for the whole layer), redoing the boundary costs far more than the
    // exchange it would hide.
    if (runs_reference_code(*k->kernel)) {
      why_not = "not overlapped: a boundary kernel would run oneDNN's reference code (" +
                k->kernel->implementation() + ")";
      return nullptr;
    }
    k->src = std::make_unique<FormatBridge>(backend, k->kernel->src_format(), l.src_layout);
    k->dst = std::make_unique<FormatBridge>(backend, k->kernel->dst_format(), l.dst_layout);
    const size_t sizes[] = {dense_bytes(p.window_dims, d.dtype),
                            dense_bytes(p.out_dims, d.dtype),
                            k->src->bytes(),
                            k->dst->bytes(),
                            k->kernel->scratch_bytes(),
                            static_cast<size_t>(b->weight_count_) * dtype_size(d.dtype)};
    for (size_t i = 0; i < 6; ++i) k->offset[i + 1] = k->offset[i] + align_up(sizes[i], 256);
    b->scratch_bytes_ = std::max(b->scratch_bytes_, k->offset[6]);
    b->kernels_.push_back(std::move(k));
  }
  b->pieces_ = std::move(pieces);
  return b;
}

void ConvBoundaries::forward(const void* window, const void* weights, const void* bias, void* dst,
                             void* scratch) {
  for (size_t i = 0; i < kernels_.size(); ++i) {
    Kernel& k = *kernels_[i];
    const Kernel::Slices m = k.at(scratch);
    pieces_->window_in(i, window, m.window, dtype_);
    k.kernel->forward(k.src->to_kernel(m.window, m.src), weights, bias,
                      k.dst->kernel_buffer(m.out, m.dst), m.kernel);
    k.dst->to_plain(m.dst, m.out);
    pieces_->out_to(i, m.out, dst, dtype_);
  }
}

// The pieces partition the outputs that read the halo, so their window gradients summed are the
// halo rows' gradient.
void ConvBoundaries::backward_halo(const void* diff_dst, const void* weights, void* window_grad,
                                   void* scratch) {
  std::memset(window_grad, 0, dense_bytes(pieces_->window_dims(), dtype_));
  for (size_t i = 0; i < kernels_.size(); ++i) {
    Kernel& k = *kernels_[i];
    const Kernel::Slices m = k.at(scratch);
    pieces_->out_in(i, diff_dst, m.out, dtype_);
    k.kernel->backward_data(k.dst->to_kernel(m.out, m.dst), weights,
                            k.src->kernel_buffer(m.window, m.src), m.kernel);
    k.src->to_plain(m.src, m.window);
    pieces_->window_add(i, m.window, window_grad, dtype_);
  }
}

void ConvBoundaries::add_halo_weight_grad(const void* window, const void* diff_dst,
                                          void* diff_weights, void* scratch) {
  for (size_t i = 0; i < kernels_.size(); ++i) {
    const BoundaryPieces::Piece& p = pieces_->pieces()[i];
    Kernel& k = *kernels_[i];
    const Kernel::Slices m = k.at(scratch);
    pieces_->window_in(i, window, m.window, dtype_);
    // Own rows: the whole kernel counted them.
    move_box(nullptr, p.window_dims, p.own_rows, m.window, p.window_dims, p.own_rows, dtype_,
             BoxOp::zero);
    pieces_->out_in(i, diff_dst, m.out, dtype_);
    k.kernel->backward_weights(k.src->to_kernel(m.window, m.src), k.dst->to_kernel(m.out, m.dst),
                               m.dw, nullptr, m.kernel);
    add_into(diff_weights, m.dw, weight_count_, dtype_);
  }
}

}  // namespace crest
