#include "onednn/winograd_conv.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

#include "crest/core/error.hpp"
#include "onednn/lane_addressing.hpp"
#include "onednn/primitive.hpp"
#include "onednn/winograd_f4x3.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn {

namespace {

using dnnl::memory;
using lanes::kLanes;
using winograd::kPoints;
using winograd::kTile;

struct ProductDescs {
  memory::desc a, b, c;
};
using DescsForRows = std::function<ProductDescs(int64_t rows)>;

// The 36 matrix products of one pass for a chunk of `rows` tiles: one batched oneDNN matmul for
// full chunks and one for the last, shorter chunk. `accumulate` adds every chunk after the first
// into c (the weight gradient's sum over chunks); the first overwrites it, so c needs no zeroing
// (75 MB for the ASPP's 2048 x 256 filters).
class ChunkProducts {
 public:
  ChunkProducts() = default;
  ChunkProducts(const ContextPtr& ctx, int64_t full_rows, int64_t last_rows,
                const DescsForRows& descs, bool accumulate, const std::string& what)
      : full_rows_(full_rows) {
    full_ = make(ctx, descs(full_rows), accumulate, what);
    if (last_rows != full_rows) last_ = make(ctx, descs(last_rows), accumulate, what);
    if (accumulate) first_ = make(ctx, descs(full_rows), false, what);  // chunks start full
  }

  size_t scratchpad_bytes() const {
    size_t most = full_.scratchpad_bytes();
    for (const BoundPrimitive* p : {&last_, &first_})
      if (p->valid()) most = std::max(most, p->scratchpad_bytes());
    return most;
  }

  void run(int64_t rows, bool first_chunk, const float* a, const float* b, float* c,
           void* scratchpad) {
    BoundPrimitive& p = first_chunk && first_.valid() ? first_ : rows == full_rows_ ? full_ : last_;
    p.set(DNNL_ARG_SRC, a);
    p.set(DNNL_ARG_WEIGHTS, b);
    p.set(DNNL_ARG_DST, c);
    p.run(scratchpad);
  }

 private:
  static BoundPrimitive make(const ContextPtr& ctx, const ProductDescs& d, bool accumulate,
                             const std::string& what) {
    return bound_matmul(ctx, d.a, d.b, d.c, accumulate, what);
  }

  int64_t full_rows_ = 0;
  BoundPrimitive full_, last_, first_;
};

memory::desc row_major(int64_t rows, int64_t cols) {
  return {{kPoints, rows, cols}, memory::data_type::f32, memory::format_tag::abc};
}

// [rows][k] x [k][n] for every point: the forward and the data gradient.
DescsForRows mapping(int64_t from, int64_t to) {
  return [from, to](int64_t rows) {
    return ProductDescs{row_major(rows, from), row_major(from, to), row_major(rows, to)};
  };
}

// [out][rows] x [rows][in] for every point, the first factor read transposed from the gradient
// tiles' [rows][out]: the weight gradient of one chunk.
DescsForRows weight_gradient(int64_t out_c, int64_t in_c) {
  return [out_c, in_c](int64_t rows) {
    const memory::desc tiles_t({kPoints, out_c, rows}, memory::data_type::f32,
                               memory::dims{rows * out_c, 1, out_c});
    return ProductDescs{tiles_t, row_major(rows, in_c), row_major(out_c, in_c)};
  };
}

// How a pass walks its tiles: `rows` per chunk, the last chunk `last_rows`.
struct Chunking {
  int64_t tiles = 0, rows = 0, last_rows = 0;
};
Chunking chunking(int64_t tiles, int64_t widest_channels, int64_t chunk_floats) {
  const int64_t rows = std::clamp<int64_t>(chunk_floats / (kPoints * widest_channels), 1, tiles);
  return {tiles, rows, tiles - (tiles - 1) / rows * rows};
}

bool turned_off_by_environment() {
  const char* v = std::getenv("CREST_WINOGRAD");
  return v != nullptr && std::string(v) == "0";
}

class WinogradConv final : public ConvKernel {
 public:
  WinogradConv(const ContextPtr& ctx, const ConvDesc& d, int64_t chunk_floats)
      : in_c_(d.in_channels), out_c_(d.out_channels), bf16_(d.dtype == DType::bf16) {
    const Shape src_shape{d.n, d.in_channels, d.in_size[0], d.in_size[1]};
    const Shape dst_shape{d.n, d.out_channels, d.out_size[0], d.out_size[1]};
    const LaneLayout src_layout = lane_layout(src_shape, d.dtype);
    const LaneLayout dst_layout = lane_layout(dst_shape, d.dtype);
    src_fmt_ = src_layout.format;
    dst_fmt_ = dst_layout.format;
    const Addressing& src = src_layout.addressing;
    const Addressing& dst = dst_layout.addressing;
    // The forward tiles the output; the data gradient, a convolution of the output gradient with
    // the turned filters (padding 2 d - pad), tiles the input.
    const int64_t dh = d.dilation[0], dw = d.dilation[1];
    forward_ = winograd::grid(d.n, src, dst, in_c_, out_c_, d.pad_lo[0], d.pad_lo[1], dh, dw);
    data_ = winograd::grid(d.n, dst, src, out_c_, in_c_, 2 * dh - d.pad_lo[0], 2 * dw - d.pad_lo[1],
                           dh, dw);
    const int64_t widest = std::max(in_c_, out_c_);
    forward_chunks_ = chunking(forward_.tiles(), widest, chunk_floats);
    data_chunks_ = chunking(data_.tiles(), widest, chunk_floats);
    const std::string what = "Winograd F(4x4, 3x3) " + std::to_string(in_c_) + " -> " +
                             std::to_string(out_c_) + " channels";
    forward_products_ = ChunkProducts(ctx, forward_chunks_.rows, forward_chunks_.last_rows,
                                      mapping(in_c_, out_c_), false, what + " forward");
    if (d.training) {
      data_products_ = ChunkProducts(ctx, data_chunks_.rows, data_chunks_.last_rows,
                                     mapping(out_c_, in_c_), false, what + " data gradient");
      weight_products_ =
          ChunkProducts(ctx, forward_chunks_.rows, forward_chunks_.last_rows,
                        weight_gradient(out_c_, in_c_), true, what + " weight gradient");
    }
  }

  MemFormat src_format() const override { return src_fmt_; }
  MemFormat dst_format() const override { return dst_fmt_; }

  std::string implementation() const override {
    return "crest Winograd F(4x4,3x3): transforms " + cpu_level_name(cpu_level()) +
           ", oneDNN matmuls";
  }
  size_t scratch_bytes() const override {
    size_t most = forward_scratch(nullptr).used;
    most = std::max(most, data_scratch(nullptr).used);
    return std::max(most, weight_scratch(nullptr).used);
  }

  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    convolve(false, src, static_cast<const float*>(weights), static_cast<const float*>(bias), dst,
             scratch);
  }

  // The same algorithm on the output gradient, with the turned filters (data_).
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    convolve(true, diff_dst, static_cast<const float*>(weights), nullptr, diff_src, scratch);
  }

  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    if (diff_bias != nullptr) throw_runtime("Winograd convolution: asked for a bias gradient");
    auto* dw = static_cast<float*>(diff_weights);
    if (bf16_)
      backward_weights_as(static_cast<const uint16_t*>(src), static_cast<const uint16_t*>(diff_dst),
                          dw, scratch);
    else
      backward_weights_as(static_cast<const float*>(src), static_cast<const float*>(diff_dst), dw,
                          scratch);
  }

 private:
  void convolve(bool data_gradient, const void* in, const float* weights, const float* bias,
                void* out, void* scratch) {
    if (bf16_)
      convolve_as(data_gradient, static_cast<const uint16_t*>(in), weights, bias,
                  static_cast<uint16_t*>(out), scratch);
    else
      convolve_as(data_gradient, static_cast<const float*>(in), weights, bias,
                  static_cast<float*>(out), scratch);
  }

  // The passes for activations of type T (float, or uint16_t bf16 codes). The forward convolves
  // the input with the filters; the data gradient, the output gradient with the turned filters.
  template <typename T>
  void convolve_as(bool data_gradient, const T* in, const float* weights, const float* bias, T* out,
                   void* scratch) {
    const winograd::Grid& g = data_gradient ? data_ : forward_;
    ChunkProducts& products = data_gradient ? data_products_ : forward_products_;
    const Buffers s = data_gradient ? data_scratch(scratch) : forward_scratch(scratch);
    winograd::filters(weights, out_c_, in_c_, data_gradient, s.filters);
    for_chunks(data_gradient ? data_chunks_ : forward_chunks_, [&](int64_t first, int64_t last) {
      winograd::input_tiles(g, in, first, last, s.in);
      products.run(last - first, first == 0, s.in, s.filters, s.out, s.scratchpad);
      winograd::output_tiles(g, s.out, bias, first, last, out);
    });
  }

  template <typename T>
  void backward_weights_as(const T* src, const T* diff_dst, float* diff_weights, void* scratch) {
    const Buffers s = weight_scratch(scratch);
    for_chunks(forward_chunks_, [&](int64_t first, int64_t last) {
      winograd::input_tiles(forward_, src, first, last, s.in);
      winograd::gradient_tiles(forward_, diff_dst, first, last, s.out);
      weight_products_.run(last - first, first == 0, s.out, s.in, s.filters, s.scratchpad);
    });
    winograd::filter_gradient(s.filters, out_c_, in_c_, diff_weights);
  }

  // One pass's scratch: the transformed filters (or their gradient), one chunk's transformed
  // input and output tiles, and the matmul's scratchpad. A null base only sizes it.
  struct Buffers {
    float *filters = nullptr, *in = nullptr, *out = nullptr;
    void* scratchpad = nullptr;
    size_t used = 0;
  };
  static Buffers carve(void* base, int64_t rows, int64_t in_c, int64_t out_c,
                       const ChunkProducts& products) {
    ScratchCarver c(base);
    auto floats = [&](int64_t n) {
      return static_cast<float*>(c.take(static_cast<size_t>(n) * sizeof(float)));
    };
    Buffers b;
    b.filters = floats(kPoints * in_c * out_c);
    b.in = floats(kPoints * rows * in_c);
    b.out = floats(kPoints * rows * out_c);
    b.scratchpad = c.take(products.scratchpad_bytes());
    b.used = c.used();
    return b;
  }
  Buffers forward_scratch(void* base) const {
    return carve(base, forward_chunks_.rows, in_c_, out_c_, forward_products_);
  }
  Buffers data_scratch(void* base) const {
    return carve(base, data_chunks_.rows, out_c_, in_c_, data_products_);
  }
  Buffers weight_scratch(void* base) const {
    return carve(base, forward_chunks_.rows, in_c_, out_c_, weight_products_);
  }

  template <typename F>
  static void for_chunks(const Chunking& c, F&& f) {
    for (int64_t first = 0; first < c.tiles; first += c.rows)
      f(first, std::min(c.tiles, first + c.rows));
  }

  int64_t in_c_, out_c_;
  bool bf16_;
  MemFormat src_fmt_, dst_fmt_;
  winograd::Grid forward_, data_;
  Chunking forward_chunks_, data_chunks_;
  ChunkProducts forward_products_, data_products_, weight_products_;
};

}  // namespace

bool winograd_serves(const ConvDesc& d) {
  if (d.spatial_rank != 2 || d.groups != 1 || d.transposed) return false;
  if (d.dtype != DType::f32 && d.dtype != DType::bf16) return false;
  if (d.post_op.kind != EltwiseKind::none || (d.training && d.bias && d.bias_grad)) return false;
  for (size_t i = 0; i < 2; ++i)
    if (d.kernel[i] != 3 || d.stride[i] != 1 || d.dilation[i] < 1 || d.pad_lo[i] < 0 ||
        d.pad_lo[i] > 2 * d.dilation[i] || d.pad_hi[i] < 0)
      return false;
  return d.in_channels % kLanes == 0 && d.out_channels % kLanes == 0;
}

double winograd_tile_use(const ConvDesc& d) {
  auto use = [&](const std::array<int64_t, 3>& size) {
    double wanted = 1, covered = 1;
    for (size_t i = 0; i < 2; ++i) {
      const int64_t tiles = winograd::tiles_along(size[i], d.dilation[i]);
      wanted *= static_cast<double>(size[i]);
      covered *= static_cast<double>(tiles * kTile * d.dilation[i]);
    }
    return wanted / covered;
  };
  return std::min(use(d.in_size), use(d.out_size));
}

bool winograd_applies(const ConvDesc& d) {
  if (!winograd_serves(d) || winograd_tile_use(d) < kWinogradMinTileUse) return false;
  for (const int64_t c : {d.in_channels, d.out_channels})
    if (c < kWinogradMinChannels) return false;
  return !turned_off_by_environment();
}

std::unique_ptr<ConvKernel> make_winograd_conv(const ContextPtr& ctx, const ConvDesc& d,
                                               int64_t chunk_floats) {
  if (!winograd_serves(d)) throw_usage("Winograd convolution: not a problem it serves");
  if (chunk_floats < 1) throw_usage("Winograd convolution: chunk_floats must be positive");
  return std::make_unique<WinogradConv>(ctx, d, chunk_floats);
}

}  // namespace crest::onednn
