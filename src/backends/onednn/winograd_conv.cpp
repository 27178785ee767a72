#include "onednn/winograd_conv.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

#include "crest/core/env_setting.hpp"
#include "crest/core/error.hpp"
#include "onednn/channel_sum.hpp"
#include "onednn/lane_addressing.hpp"
#include "onednn/onednn_backend.hpp"
#include "onednn/primitive.hpp"
#include "onednn/winograd_2d.hpp"
#include "onednn/winograd_f4x3_3d.hpp"
#include "onednn/winograd_f4x5_1d.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn {

namespace {

using dnnl::memory;
using winograd::OutputActivation;

// The tilings: F(4x4, 3x3) and F(4x4, 5x5) for 2-D convolutions (dilated or not) and
// F(4x4x4, 3x3x3) for 3-D ones, each with its grid, its number of transform points and its
// transforms.
template <typename Algo>
struct Planar {
  using Grid = winograd::Grid;
  static constexpr int64_t kTaps = Algo::kTaps;
  static constexpr int64_t kPoints = winograd::points(kTaps);
  static constexpr const char* kName = kTaps == 5 ? "F(4x4,5x5)" : "F(4x4,3x3)";

  // The forward tiles the output; the data gradient, a convolution of the output gradient with
  // the turned filters (padding (taps - 1) d - pad), tiles the input.
  static Grid forward_grid(const ConvDesc& d, const Addressing& src, const Addressing& dst) {
    return winograd::grid(kTaps, d.n, src, dst, d.in_channels, d.out_channels, d.pad_lo[0],
                          d.pad_lo[1], d.dilation[0], d.dilation[1]);
  }
  static Grid data_grid(const ConvDesc& d, const Addressing& src, const Addressing& dst) {
    const int64_t dh = d.dilation[0], dw = d.dilation[1];
    return winograd::grid(kTaps, d.n, dst, src, d.out_channels, d.in_channels,
                          (kTaps - 1) * dh - d.pad_lo[0], (kTaps - 1) * dw - d.pad_lo[1], dh, dw);
  }
  static int64_t tiles(const Grid& g) { return g.tiles(); }
  template <typename T>
  static void input_tiles(const Grid& g, const T* in, int64_t first, int64_t last, float* v) {
    winograd::input_tiles(g, in, first, last, v);
  }
  template <typename T>
  static void output_tiles(const Grid& g, const float* m, const float* bias,
                           const OutputActivation& act, int64_t first, int64_t last, T* out) {
    winograd::output_tiles(g, m, bias, act, first, last, out);
  }
  template <typename T>
  static void gradient_tiles(const Grid& g, const T* dy, int64_t first, int64_t last, float* t) {
    winograd::gradient_tiles(g, dy, first, last, t);
  }
  static void filters(const float* w, int64_t out_c, int64_t in_c, bool data, float* u) {
    winograd::filters(kTaps, w, out_c, in_c, data, u);
  }
  static void filter_gradient(const float* z, int64_t out_c, int64_t in_c, float* dw) {
    winograd::filter_gradient(kTaps, z, out_c, in_c, dw);
  }
};

struct Volumetric {
  using Grid = winograd3d::Grid;
  static constexpr int64_t kPoints = winograd3d::kPoints;
  static constexpr const char* kName = "F(4x4x4,3x3x3)";

  static winograd3d::Extent extent(const std::array<int64_t, 3>& size) {
    return {size[0], size[1], size[2]};
  }
  static Grid forward_grid(const ConvDesc& d, const Addressing& src, const Addressing& dst) {
    return winograd3d::grid(d.n, src, extent(d.in_size), dst, extent(d.out_size), d.in_channels,
                            d.out_channels, extent(d.pad_lo));
  }
  static Grid data_grid(const ConvDesc& d, const Addressing& src, const Addressing& dst) {
    const winograd3d::Extent pad{2 - d.pad_lo[0], 2 - d.pad_lo[1], 2 - d.pad_lo[2]};
    return winograd3d::grid(d.n, dst, extent(d.out_size), src, extent(d.in_size), d.out_channels,
                            d.in_channels, pad);
  }
  static int64_t tiles(const Grid& g) { return g.tiles_total(); }
  template <typename T>
  static void input_tiles(const Grid& g, const T* in, int64_t first, int64_t last, float* v) {
    winograd3d::input_tiles(g, in, first, last, v);
  }
  template <typename T>
  static void output_tiles(const Grid& g, const float* m, const float* bias,
                           const OutputActivation& act, int64_t first, int64_t last, T* out) {
    winograd3d::output_tiles(g, m, bias, act, first, last, out);
  }
  template <typename T>
  static void gradient_tiles(const Grid& g, const T* dy, int64_t first, int64_t last, float* t) {
    winograd3d::gradient_tiles(g, dy, first, last, t);
  }
  static void filters(const float* w, int64_t out_c, int64_t in_c, bool data, float* u) {
    winograd3d::filters(w, out_c, in_c, data, u);
  }
  static void filter_gradient(const float* z, int64_t out_c, int64_t in_c, float* dw) {
    winograd3d::filter_gradient(z, out_c, in_c, dw);
  }
};

struct ProductDescs {
  memory::desc a, b, c;
};
using DescsForRows = std::function<ProductDescs(int64_t rows)>;

// The 36 (64, 216) matrix products of one pass for a chunk of `rows` tiles: one batched oneDNN
// matmul for full chunks and one for the last, shorter chunk. `accumulate` adds every chunk after
// the first into c (the weight gradient's sum over chunks); the first overwrites it, so c needs no
// zeroing (75 MB for the ASPP's 2048 x 256 filters).
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

memory::desc row_major(int64_t points, int64_t rows, int64_t cols) {
  return {{points, rows, cols}, memory::data_type::f32, memory::format_tag::abc};
}

// [rows][k] x [k][n] for every point: the forward and the data gradient.
DescsForRows mapping(int64_t points, int64_t from, int64_t to) {
  return [points, from, to](int64_t rows) {
    return ProductDescs{row_major(points, rows, from), row_major(points, from, to),
                        row_major(points, rows, to)};
  };
}

// [out][rows] x [rows][in] for every point, the first factor read transposed from the gradient
// tiles' [rows][out]: the weight gradient of one chunk.
DescsForRows weight_gradient(int64_t points, int64_t out_c, int64_t in_c) {
  return [points, out_c, in_c](int64_t rows) {
    const memory::desc tiles_t({points, out_c, rows}, memory::data_type::f32,
                               memory::dims{rows * out_c, 1, out_c});
    return ProductDescs{tiles_t, row_major(points, rows, in_c), row_major(points, out_c, in_c)};
  };
}

// How a pass walks its tiles: `rows` per chunk, the last chunk `last_rows`.
struct Chunking {
  int64_t tiles = 0, rows = 0, last_rows = 0;
};
Chunking chunking(int64_t points, int64_t tiles, int64_t widest_channels, int64_t chunk_floats) {
  const int64_t rows = std::clamp<int64_t>(chunk_floats / (points * widest_channels), 1, tiles);
  return {tiles, rows, tiles - (tiles - 1) / rows * rows};
}

// The three passes of a stride-1 convolution by the tiling `Scheme` (Planar or Volumetric).
template <typename Scheme>
class WinogradConv final : public ConvKernel {
 public:
  using Grid = typename Scheme::Grid;
  static constexpr int64_t kPoints = Scheme::kPoints;

  WinogradConv(const ContextPtr& ctx, const ConvDesc& d, int64_t chunk_floats)
      : in_c_(d.in_channels),
        out_c_(d.out_channels),
        in_padded_(lanes::padded_to_lanes(d.in_channels)),
        out_padded_(lanes::padded_to_lanes(d.out_channels)),
        bf16_(d.dtype == DType::bf16),
        act_(output_activation(d.post_op)) {
    std::vector<int64_t> src_dims{d.n, d.in_channels}, dst_dims{d.n, d.out_channels};
    for (size_t a = 0; a < static_cast<size_t>(d.spatial_rank); ++a) {
      src_dims.push_back(d.in_size[a]);
      dst_dims.push_back(d.out_size[a]);
    }
    const Shape src_shape(src_dims), dst_shape(dst_dims);
    const LaneLayout src_layout = lane_layout(src_shape, d.dtype);
    const LaneLayout dst_layout = lane_layout(dst_shape, d.dtype);
    src_fmt_ = src_layout.format;
    dst_fmt_ = dst_layout.format;
    // The bias gradient is the output gradient's per-channel sum: one pass over it, in its
    // layout (bf16 widened as it is read, the sums float32 as the bias).
    if (d.training && d.bias && d.bias_grad) bias_sum_ = make_channel_sum(dst_fmt_);
    forward_ = Scheme::forward_grid(d, src_layout.addressing, dst_layout.addressing);
    data_ = Scheme::data_grid(d, src_layout.addressing, dst_layout.addressing);
    const int64_t widest = std::max(in_padded_, out_padded_);
    forward_chunks_ = chunking(kPoints, Scheme::tiles(forward_), widest, chunk_floats);
    data_chunks_ = chunking(kPoints, Scheme::tiles(data_), widest, chunk_floats);
    const std::string what = std::string("Winograd ") + Scheme::kName + " " +
                             std::to_string(in_c_) + " -> " + std::to_string(out_c_) + " channels";
    forward_products_ =
        ChunkProducts(ctx, forward_chunks_.rows, forward_chunks_.last_rows,
                      mapping(kPoints, in_padded_, out_padded_), false, what + " forward");
    if (d.training) {
      data_products_ =
          ChunkProducts(ctx, data_chunks_.rows, data_chunks_.last_rows,
                        mapping(kPoints, out_padded_, in_padded_), false, what + " data gradient");
      weight_products_ = ChunkProducts(ctx, forward_chunks_.rows, forward_chunks_.last_rows,
                                       weight_gradient(kPoints, out_padded_, in_padded_), true,
                                       what + " weight gradient");
    }
  }

  MemFormat src_format() const override { return src_fmt_; }
  MemFormat dst_format() const override { return dst_fmt_; }

  std::string implementation() const override {
    return std::string("crest Winograd ") + Scheme::kName + ": transforms " +
           cpu_level_name(cpu_level()) + ", oneDNN matmuls";
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

  // The same algorithm on the output gradient, with the turned filters (data_) and no activation
  // (the fused activation's gradient is taken before this pass).
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    convolve(true, diff_dst, static_cast<const float*>(weights), nullptr, diff_src, scratch);
  }

  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    if (diff_bias != nullptr) {
      if (!bias_sum_)
        throw_runtime("Winograd convolution: a bias gradient its desc did not ask for");
      bias_sum_->run(diff_dst, diff_bias);
    }
    auto* dw = static_cast<float*>(diff_weights);
    if (bf16_)
      backward_weights_as(static_cast<const uint16_t*>(src), static_cast<const uint16_t*>(diff_dst),
                          dw, scratch);
    else
      backward_weights_as(static_cast<const float*>(src), static_cast<const float*>(diff_dst), dw,
                          scratch);
  }

 private:
  static OutputActivation output_activation(const EltwiseDesc& e) {
    if (e.kind == EltwiseKind::relu) return {true, 0.f};
    if (e.kind == EltwiseKind::leaky_relu) return {true, e.alpha};
    return {};
  }

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
    const Grid& g = data_gradient ? data_ : forward_;
    ChunkProducts& products = data_gradient ? data_products_ : forward_products_;
    const Buffers s = data_gradient ? data_scratch(scratch) : forward_scratch(scratch);
    const OutputActivation act = data_gradient ? OutputActivation{} : act_;
    Scheme::filters(weights, out_c_, in_c_, data_gradient, s.filters);
    for_chunks(data_gradient ? data_chunks_ : forward_chunks_, [&](int64_t first, int64_t last) {
      Scheme::input_tiles(g, in, first, last, s.in);
      products.run(last - first, first == 0, s.in, s.filters, s.out, s.scratchpad);
      Scheme::output_tiles(g, s.out, bias, act, first, last, out);
    });
  }

  template <typename T>
  void backward_weights_as(const T* src, const T* diff_dst, float* diff_weights, void* scratch) {
    const Buffers s = weight_scratch(scratch);
    for_chunks(forward_chunks_, [&](int64_t first, int64_t last) {
      Scheme::input_tiles(forward_, src, first, last, s.in);
      Scheme::gradient_tiles(forward_, diff_dst, first, last, s.out);
      weight_products_.run(last - first, first == 0, s.out, s.in, s.filters, s.scratchpad);
    });
    Scheme::filter_gradient(s.filters, out_c_, in_c_, diff_weights);
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
    return carve(base, forward_chunks_.rows, in_padded_, out_padded_, forward_products_);
  }
  Buffers data_scratch(void* base) const {
    return carve(base, data_chunks_.rows, out_padded_, in_padded_, data_products_);
  }
  Buffers weight_scratch(void* base) const {
    return carve(base, forward_chunks_.rows, in_padded_, out_padded_, weight_products_);
  }

  template <typename F>
  static void for_chunks(const Chunking& c, F&& f) {
    for (int64_t first = 0; first < c.tiles; first += c.rows)
      f(first, std::min(c.tiles, first + c.rows));
  }

  // The channel counts, and the same padded to 16: the transformed tiles and filters carry
  // whole lane blocks, the padding zero.
  int64_t in_c_, out_c_, in_padded_, out_padded_;
  bool bf16_;
  OutputActivation act_;
  MemFormat src_fmt_, dst_fmt_;
  Grid forward_, data_;
  Chunking forward_chunks_, data_chunks_;
  std::unique_ptr<ChannelSumKernel> bias_sum_;  // where the bias gradient is wanted
  ChunkProducts forward_products_, data_products_, weight_products_;
};

}  // namespace

bool winograd_serves(const ConvDesc& d) {
  if ((d.spatial_rank != 2 && d.spatial_rank != 3) || d.groups != 1 || d.transposed) return false;
  if (d.dtype != DType::f32 && d.dtype != DType::bf16) return false;
  const EltwiseKind act = d.post_op.kind;
  if (act != EltwiseKind::none && act != EltwiseKind::relu && act != EltwiseKind::leaky_relu)
    return false;
  // Square filters: 3x3 or 5x5 in 2-D, 3x3x3 in 3-D.
  const int64_t taps = d.kernel[0];
  if (d.spatial_rank == 3 ? taps != 3 : !winograd::tiling_takes(taps)) return false;
  for (size_t i = 0; i < static_cast<size_t>(d.spatial_rank); ++i)
    if (d.kernel[i] != taps || d.stride[i] != 1 || d.dilation[i] < 1 || d.pad_lo[i] < 0 ||
        d.pad_lo[i] > (taps - 1) * d.dilation[i] || d.pad_hi[i] < 0 ||
        (d.spatial_rank == 3 && d.dilation[i] != 1))
      return false;
  return d.in_channels > 0 && d.out_channels > 0;
}

double winograd_tile_use(const ConvDesc& d) {
  auto use = [&](const std::array<int64_t, 3>& size) {
    double wanted = 1, covered = 1;
    for (size_t i = 0; i < static_cast<size_t>(d.spatial_rank); ++i) {
      const int64_t tiles = winograd::tiles_along(size[i], d.dilation[i]);
      wanted *= static_cast<double>(size[i]);
      covered *= static_cast<double>(tiles * winograd::kTile * d.dilation[i]);
    }
    return wanted / covered;
  };
  return std::min(use(d.in_size), use(d.out_size));
}

WinogradSetting winograd_setting() {
  return env_setting<WinogradSetting>("CREST_WINOGRAD",
                                      {{"", WinogradSetting::automatic, "by rule"},
                                       {"0", WinogradSetting::off, "never Winograd"},
                                       {"1", WinogradSetting::everywhere, "wherever it serves"}});
}

bool winograd_applies(const ConvDesc& d) {
  if (!winograd_serves(d)) return false;
  const WinogradSetting setting = winograd_setting();
  if (setting != WinogradSetting::automatic) return setting == WinogradSetting::everywhere;
  if (winograd_tile_use(d) < kWinogradMinTileUse) return false;
  if (d.dtype == DType::bf16 && amx_bf16_kernels()) return false;
  const bool volume = d.spatial_rank == 3, five = !volume && d.kernel[0] == 5;
  const int64_t min_channels = volume ? kWinograd3dMinChannels
                               : five ? kWinograd5x5MinChannels
                                      : kWinogradMinChannels;
  for (const int64_t c : {d.in_channels, d.out_channels})
    if (c < min_channels) return false;
  if (five) {  // as for volumes: each pass that runs needs the tiles
    auto tiles = [&](const std::array<int64_t, 3>& size) {
      int64_t n = d.n;
      for (size_t a = 0; a < 2; ++a)
        n *= d.dilation[a] * winograd::tiles_along(size[a], d.dilation[a]);
      return n;
    };
    if (tiles(d.out_size) < kWinograd5x5MinTiles) return false;
    if (d.training && d.data_grad && tiles(d.in_size) < kWinograd5x5MinTiles) return false;
  }
  if (volume) {
    // The forward and the weight gradient tile the output, the data gradient the input: each
    // pass that runs needs the tiles (a split's data-gradient kernel has a wider output).
    auto tiles = [&](const std::array<int64_t, 3>& size) {
      int64_t n = d.n;
      for (size_t a = 0; a < 3; ++a) n *= winograd3d::tiles_along(size[a]);
      return n;
    };
    if (tiles(d.out_size) < kWinograd3dMinTiles) return false;
    if (d.training && d.data_grad && tiles(d.in_size) < kWinograd3dMinTiles) return false;
  }
  return true;
}

std::unique_ptr<ConvKernel> make_winograd_conv(const ContextPtr& ctx, const ConvDesc& d,
                                               int64_t chunk_floats) {
  if (!winograd_serves(d)) throw_usage("Winograd convolution: not a problem it serves");
  if (chunk_floats < 1) throw_usage("Winograd convolution: chunk_floats must be positive");
  if (d.spatial_rank == 3) return std::make_unique<WinogradConv<Volumetric>>(ctx, d, chunk_floats);
  if (d.kernel[0] == 5)
    return std::make_unique<WinogradConv<Planar<winograd::F4x5>>>(ctx, d, chunk_floats);
  return std::make_unique<WinogradConv<Planar<winograd::F4x3>>>(ctx, d, chunk_floats);
}

}  // namespace crest::onednn
