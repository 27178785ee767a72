#include "onednn/direct_weight_grad_3d.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "widest_vectors.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace crest::onednn {

using dnnl::memory;

namespace {

constexpr int64_t kLanes = 8;  // floats per ymm register
constexpr int kMaxLanes = DirectWeightGrad3d::kMaxLanes;
constexpr int kMaxOcVectors = 2;  // 8-channel output vectors per point: 6 x 2 accumulators
// Output points per chunk: each tile sums a chunk in float from zero, and the chunks' sums add
// up in double.
constexpr int64_t kChunkPoints = 1024;
// Output points per block (at least one row): every tile of a thread walks a block before the
// next block is read, so the block's output gradient (16 channels: 64 bytes a point) and the
// input rows of one row of taps stay in L1 while that row of taps' tiles go by. On a Zen 3
// (CosmoFlow at 128^3, batch 2, 2 threads, huge pages as in crest's arena), one-row blocks
// against every tile walking a 1024-point chunk, best of 18 runs: conv2 347 against 383 ms,
// conv3 186 against 230; conv1 (rows of 128 points, 4 input channels) 191 against 181
// (docs/performance.md).
constexpr int64_t kBlockPoints = 32;
// Rows shorter than this lose to oneDNN's im2col + GEMM: each row costs a loop exit and an address
// computation beside its 6 cycles of FMAs per point. Measured on a Zen 3 (CosmoFlow at 128^3,
// batch 2, 2 threads): 32-point rows and longer ran 1.05-1.4x faster than the GEMM, 16-point rows
// (conv4) 0.75x, 8-point rows (conv5) 0.7x.
constexpr int64_t kMinRowPoints = 32;

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Output o reads input o * stride + offset: inside for o in [lo, hi).
void valid_outputs(int64_t offset, int64_t stride, int64_t in, int64_t out, int64_t& lo,
                   int64_t& hi) {
  lo = std::clamp<int64_t>(-floor_div(offset, stride), 0, out);
  hi = std::clamp<int64_t>(floor_div(in - 1 - offset, stride) + 1, lo, out);
}

using Tap = DirectWeightGrad3d::Tap;
using Tile = DirectWeightGrad3d::Tile;

// One block of output rows (n, od, oh) and where the data are.
struct Block {
  const float* x;  // input, channels-last
  const float* y;  // output gradient, channels-last
  int64_t row0, row1;
  int64_t n0, od0, oh0;  // row0 as (n, od, oh)
  bool first;            // the chunk's first block: the tiles start from zero
};

// A tile's float sums over the blocks of a chunk so far: [lane][output vector][8].
constexpr int64_t kTileSums = int64_t{kMaxLanes} * kMaxOcVectors * kLanes;

using TileFn = void (*)(const ConvDesc&, const Tap&, const Tile&, const Block&, float* sums);

#if defined(__x86_64__)
// One point's products into the tile: the tile's input columns (broadcast) times its output
// vectors.
template <int IC, int OCV>
__attribute__((target("avx2,fma"), always_inline)) inline void fma_point(const float* x,
                                                                         const float* y,
                                                                         __m256 (&acc)[IC][OCV]) {
  __m256 yv[OCV];
#pragma GCC unroll 2
  for (int v = 0; v < OCV; ++v) yv[v] = _mm256_loadu_ps(y + kLanes * v);
#pragma GCC unroll 6
  for (int i = 0; i < IC; ++i) {
    const __m256 xv = _mm256_broadcast_ss(x + i);
#pragma GCC unroll 2
    for (int v = 0; v < OCV; ++v) acc[i][v] = _mm256_fmadd_ps(xv, yv[v], acc[i][v]);
  }
}

// fma_point at an edge point p, where some of the tile's lanes read outside the volume: those
// lanes' inputs count as zero. Lane 0's input would be x[x_index], inside the volume or not.
template <int IC, int OCV>
__attribute__((target("avx2,fma"), always_inline)) inline void fma_edge_point(
    const Tile& tile, int64_t p, const float* x, int64_t x_index, const float* y,
    __m256 (&acc)[IC][OCV]) {
  alignas(32) float xs[IC];
  for (int i = 0; i < IC; ++i) {
    const bool inside = p >= tile.lane_lo[i] && p < tile.lane_hi[i];
    xs[i] = inside ? x[x_index + i] : 0.0F;
  }
  fma_point<IC, OCV>(xs, y, acc);
}

// One tile's accumulation over one block: for each row of the block whose input at the tile's
// (kd, kh) lies inside the volume, the run of points along w. Where the tile spans several kw
// taps, the points at the row's ends where some of its taps read outside the volume (the edges)
// use a copy of the input with those channels zeroed: each sum still runs point by point in the
// row's order, and the added zero products change no bit.
template <int IC, int OCV>
__attribute__((target("avx2,fma"))) void accumulate(const ConvDesc& d, const Tap& t,
                                                    const Tile& tile, const Block& c, float* sums) {
  const int64_t in_c = d.in_channels, out_c = d.out_channels;
  // The sums go on from the chunk's earlier blocks: in registers they would be the same float
  // operations in the same order.
  __m256 acc[IC][OCV];
#pragma GCC unroll 6
  for (int i = 0; i < IC; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < OCV; ++v)
      acc[i][v] = c.first ? _mm256_setzero_ps() : _mm256_loadu_ps(sums + (i * OCV + v) * kLanes);
  const int64_t od_n = d.out_size[0], oh_n = d.out_size[1], ow_n = d.out_size[2];
  const int64_t x_step = d.stride[2] * in_c;
  // The row's (n, od, oh), stepped along with it: a division per row cost as much as the FMAs of
  // an 8-point row.
  int64_t n = c.n0, od = c.od0, oh = c.oh0 - 1;
  for (int64_t row = c.row0; row < c.row1 && tile.w_hi > tile.w_lo; ++row) {
    if (++oh == oh_n) {
      oh = 0;
      if (++od == od_n) od = 0, ++n;
    }
    if (od < t.lo[0] || od >= t.hi[0] || oh < t.lo[1] || oh >= t.hi[1]) continue;
    const int64_t id = od * d.stride[0] + t.offset[0], ih = oh * d.stride[1] + t.offset[1];
    // Point ow's input starts at element x_row + ow * x_step: the tile's first tap's input point
    // (outside the volume at an edge, where only the lanes inside are read), its first channel.
    const int64_t x_row =
        (((n * d.in_size[0] + id) * d.in_size[1] + ih) * d.in_size[2] + t.offset[2]) * in_c +
        tile.col0;
    const float* y_row = c.y + row * ow_n * out_c + tile.oc0;
    int64_t p = tile.w_lo;
    for (; p < tile.all_lo; ++p)
      fma_edge_point<IC, OCV>(tile, p, c.x, x_row + p * x_step, y_row + p * out_c, acc);
    for (; p < tile.all_hi; ++p)
      fma_point<IC, OCV>(c.x + (x_row + p * x_step), y_row + p * out_c, acc);
    for (; p < tile.w_hi; ++p)
      fma_edge_point<IC, OCV>(tile, p, c.x, x_row + p * x_step, y_row + p * out_c, acc);
  }
#pragma GCC unroll 6
  for (int i = 0; i < IC; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < OCV; ++v) _mm256_storeu_ps(sums + (i * OCV + v) * kLanes, acc[i][v]);
}

// Adds a tile's float sums over a chunk into the double partial gradient [tap][in][out] (stores
// them for the first chunk): the rounding error grows with a chunk's points, not with the whole
// batch and volume.
void add_chunk_sums(const ConvDesc& d, const Tile& tile, const float* sums, double* partial,
                    bool first) {
  const int64_t in_c = d.in_channels, out_c = d.out_channels;
  double* dw = partial + (static_cast<int64_t>(tile.tap) * in_c + tile.col0) * out_c + tile.oc0;
  for (int i = 0; i < tile.lanes; ++i)
    for (int64_t o = 0; o < tile.oc_vectors * kLanes; ++o) {
      const double sum = sums[int64_t{i} * tile.oc_vectors * kLanes + o];
      double& at = dw[i * out_c + o];
      at = first ? sum : at + sum;
    }
}

// out[c] = the sum over `points` rows of y[point][c], accumulated in double point by point: each
// thread takes a range of channels and streams every row, so each sum has one order whatever the
// thread count.
__attribute__((target("avx2,fma"))) void sum_over_points(const float* y, int64_t points,
                                                         int64_t channels, float* out) {
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t c0 = channels * t / threads, c1 = channels * (t + 1) / threads;
    std::vector<double> acc(static_cast<size_t>(c1 - c0), 0.0);
    for (int64_t p = 0; p < points; ++p) {
      const float* row = y + p * channels + c0;
      for (int64_t c = 0; c < c1 - c0; ++c) acc[static_cast<size_t>(c)] += row[c];
    }
    for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(acc[static_cast<size_t>(c - c0)]);
  }
}

// The tile functions by [lanes - 1][output vectors - 1].
constexpr TileFn kTileFns[kMaxLanes][kMaxOcVectors] = {
    {accumulate<1, 1>, accumulate<1, 2>}, {accumulate<2, 1>, accumulate<2, 2>},
    {accumulate<3, 1>, accumulate<3, 2>}, {accumulate<4, 1>, accumulate<4, 2>},
    {accumulate<5, 1>, accumulate<5, 2>}, {accumulate<6, 1>, accumulate<6, 2>}};
#endif

}  // namespace

bool DirectWeightGrad3d::cpu_can_run() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool DirectWeightGrad3d::applies(const ConvDesc& d, const memory::desc& src,
                                 const memory::desc& dst) {
  if (d.spatial_rank != 3 || d.groups != 1 || d.transposed || !d.training) return false;
  if (d.dtype != DType::f32 || d.out_channels % 8 != 0) return false;
  if (d.out_size[2] < kMinRowPoints) return false;
  if (cpu_level() < CpuLevel::avx2 || !cpu_can_run()) return false;
  return activations_channels_last(d, src, dst);
}

DirectWeightGrad3d::DirectWeightGrad3d(const ContextPtr& /*ctx*/, const ConvDesc& d) : d_(d) {
  CREST_CHECK(d.spatial_rank == 3 && d.out_channels % 8 == 0 && cpu_can_run(),
              "the direct 3-D weight gradient cannot compute this convolution");
  for (int64_t kd = 0; kd < d.kernel[0]; ++kd)
    for (int64_t kh = 0; kh < d.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < d.kernel[2]; ++kw) {
        Tap t;
        const int64_t k[3] = {kd, kh, kw};
        for (size_t a = 0; a < 3; ++a) {
          t.offset[a] = k[a] * d.dilation[a] - d.pad_lo[a];
          valid_outputs(t.offset[a], d.stride[a], d.in_size[a], d.out_size[a], t.lo[a], t.hi[a]);
        }
        taps_.push_back(t);
      }
  // With no dilation along w, a tap row's kw taps read one contiguous run of kw x in channels
  // at each point: a tile's lanes run over that run, so the tiles stay full when the input
  // channels are not a multiple of 6 (conv1's 4: 12 lanes instead of 4 of 6).
  const int64_t span = d.dilation[2] == 1 ? d.kernel[2] : 1;
  const int64_t columns = span * d.in_channels;
  // Output vectors outermost, columns innermost: consecutive tiles read the same output
  // gradient and the same input rows; each thread's share is a run of them.
  for (int64_t oc0 = 0; oc0 < d.out_channels; oc0 += kLanes * kMaxOcVectors)
    for (size_t tap = 0; tap < taps_.size(); tap += static_cast<size_t>(span))
      for (int64_t col0 = 0; col0 < columns; col0 += kMaxLanes)
        tiles_.push_back(make_tile(static_cast<int>(tap), col0, oc0));
  block_rows_ = std::max<int64_t>(1, kBlockPoints / d.out_size[2]);
  chunk_rows_ = std::max<int64_t>(1, kChunkPoints / d.out_size[2] / block_rows_) * block_rows_;
}

DirectWeightGrad3d::Tile DirectWeightGrad3d::make_tile(int tap, int64_t col0, int64_t oc0) const {
  const int64_t in_c = d_.in_channels, columns = (d_.dilation[2] == 1 ? d_.kernel[2] : 1) * in_c;
  Tile t{tap, col0, oc0, static_cast<int>(std::min<int64_t>(kMaxLanes, columns - col0)),
         static_cast<int>(std::min<int64_t>(kMaxOcVectors, (d_.out_channels - oc0) / kLanes))};
  // The union of the lanes' ranges, [w_lo, w_hi), and their intersection, [all_lo, all_hi).
  t.w_lo = t.all_hi = d_.out_size[2];
  t.w_hi = t.all_lo = 0;
  for (int i = 0; i < t.lanes; ++i) {
    const Tap& lane_tap = taps_[static_cast<size_t>(tap + (col0 + i) / in_c)];
    t.lane_lo[i] = lane_tap.lo[2];
    t.lane_hi[i] = lane_tap.hi[2];
    t.w_lo = std::min(t.w_lo, t.lane_lo[i]);
    t.w_hi = std::max(t.w_hi, t.lane_hi[i]);
    t.all_lo = std::max(t.all_lo, t.lane_lo[i]);
    t.all_hi = std::min(t.all_hi, t.lane_hi[i]);
  }
  // The loop walks [w_lo, all_lo) and [all_hi, w_hi) as edges: an empty intersection is one
  // point inside the union.
  t.w_hi = std::max(t.w_lo, t.w_hi);
  t.all_lo = std::clamp(t.all_lo, t.w_lo, t.w_hi);
  t.all_hi = std::clamp(t.all_hi, t.all_lo, t.w_hi);
  return t;
}

size_t DirectWeightGrad3d::scratch_bytes() const {
  return taps_.size() * static_cast<size_t>(d_.in_channels * d_.out_channels) * sizeof(double) +
         tiles_.size() * kTileSums * sizeof(float);
}

void DirectWeightGrad3d::run(const void* src, const void* diff_dst, float* diff_weights,
                             void* scratch) {
#if defined(__x86_64__)
  auto* partial = static_cast<double*>(scratch);
  const auto taps = static_cast<int64_t>(taps_.size());
  const int64_t in_c = d_.in_channels, out_c = d_.out_channels;
  auto* tile_sums = reinterpret_cast<float*>(partial + taps * in_c * out_c);
  const auto* x = static_cast<const float*>(src);
  const auto* y = static_cast<const float*>(diff_dst);
  const int64_t rows = d_.n * d_.out_size[0] * d_.out_size[1];
  const auto tiles = static_cast<int64_t>(tiles_.size());
  // Each thread takes the same run of tiles in every block; tiles write disjoint sums, so the
  // threads never wait for each other.
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t k0 = tiles * thread / threads, k1 = tiles * (thread + 1) / threads;
    for (int64_t chunk0 = 0; chunk0 < rows; chunk0 += chunk_rows_) {
      const int64_t chunk1 = std::min(rows, chunk0 + chunk_rows_);
      for (int64_t row0 = chunk0; row0 < chunk1; row0 += block_rows_) {
        const int64_t oh_n = d_.out_size[1], od_n = d_.out_size[0];
        const Block b{x,
                      y,
                      row0,
                      std::min(chunk1, row0 + block_rows_),
                      row0 / (oh_n * od_n),
                      (row0 / oh_n) % od_n,
                      row0 % oh_n,
                      row0 == chunk0};
        for (int64_t k = k0; k < k1; ++k) {
          const Tile& t = tiles_[static_cast<size_t>(k)];
          kTileFns[t.lanes - 1][t.oc_vectors - 1](d_, taps_[static_cast<size_t>(t.tap)], t, b,
                                                  tile_sums + k * kTileSums);
        }
      }
      for (int64_t k = k0; k < k1; ++k)
        add_chunk_sums(d_, tiles_[static_cast<size_t>(k)], tile_sums + k * kTileSums, partial,
                       chunk0 == 0);
    }
  }
  // [tap][in][out] in double -> crest's [out][in][tap] in float.
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out_c; ++o)
    for (int64_t i = 0; i < in_c; ++i)
      for (int64_t k = 0; k < taps; ++k)
        diff_weights[(o * in_c + i) * taps + k] =
            static_cast<float>(partial[(k * in_c + i) * out_c + o]);
#else
  (void)src, (void)diff_dst, (void)diff_weights, (void)scratch;
  throw_runtime("the direct 3-D weight gradient needs an x86-64 CPU");
#endif
}

void DirectWeightGrad3d::bias_grad(const void* diff_dst, float* diff_bias) {
#if defined(__x86_64__)
  const int64_t points = d_.n * d_.out_size[0] * d_.out_size[1] * d_.out_size[2];
  sum_over_points(static_cast<const float*>(diff_dst), points, d_.out_channels, diff_bias);
#else
  (void)diff_dst, (void)diff_bias;
  throw_runtime("the direct 3-D weight gradient needs an x86-64 CPU");
#endif
}

}  // namespace crest::onednn
