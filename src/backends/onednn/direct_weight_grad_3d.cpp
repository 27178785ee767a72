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

constexpr int64_t kLanes = 8;     // floats per ymm register
constexpr int kMaxIcTile = 6;     // input channels broadcast per point
constexpr int kMaxOcVectors = 2;  // 8-channel output vectors per point: 6 x 2 accumulators
// Output points per chunk: enough that loading and storing a tile's accumulators once per chunk
// costs little against the chunk's 12 FMAs per point, few enough that a chunk's activations stay
// in L2.
constexpr int64_t kChunkPoints = 1024;
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

// One chunk of output rows (n, od, oh) and where the data are.
struct Chunk {
  const float* x;   // input, channels-last
  const float* y;   // output gradient, channels-last
  double* partial;  // [tap][in][out]: each chunk's float sums added in double
  int64_t row0, row1;
  int64_t n0, od0, oh0;  // row0 as (n, od, oh)
  bool first;            // the tiles store their sums instead of adding them
};

using TileFn = void (*)(const ConvDesc&, const Tap&, const Tile&, const Chunk&);

#if defined(__x86_64__)
// One tile's accumulation over one chunk: for each row of the chunk whose input at the tap lies
// inside the volume, the run of points [lo, hi) along w.
template <int IC, int OCV>
__attribute__((target("avx2,fma"))) void accumulate(const ConvDesc& d, const Tap& t,
                                                    const Tile& tile, const Chunk& c) {
  const int64_t in_c = d.in_channels, out_c = d.out_channels;
  double* dw = c.partial + (static_cast<int64_t>(tile.tap) * in_c + tile.ic0) * out_c + tile.oc0;
  // Each chunk sums in float registers from zero, and the chunks' sums add up in double: the
  // rounding error grows with the chunk's points, not with the whole batch and volume.
  __m256 acc[IC][OCV];
#pragma GCC unroll 6
  for (int i = 0; i < IC; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < OCV; ++v) acc[i][v] = _mm256_setzero_ps();
  const int64_t od_n = d.out_size[0], oh_n = d.out_size[1], ow_n = d.out_size[2];
  const int64_t x_step = d.stride[2] * in_c, count = t.hi[2] - t.lo[2];
  // The row's (n, od, oh), stepped along with it: a division per row cost as much as the FMAs of
  // an 8-point row.
  int64_t n = c.n0, od = c.od0, oh = c.oh0 - 1;
  for (int64_t row = c.row0; row < c.row1 && count > 0; ++row) {
    if (++oh == oh_n) {
      oh = 0;
      if (++od == od_n) od = 0, ++n;
    }
    if (od < t.lo[0] || od >= t.hi[0] || oh < t.lo[1] || oh >= t.hi[1]) continue;
    const int64_t id = od * d.stride[0] + t.offset[0], ih = oh * d.stride[1] + t.offset[1];
    const int64_t iw = t.lo[2] * d.stride[2] + t.offset[2];
    const float* x =
        c.x + (((n * d.in_size[0] + id) * d.in_size[1] + ih) * d.in_size[2] + iw) * in_c + tile.ic0;
    const float* y = c.y + (row * ow_n + t.lo[2]) * out_c + tile.oc0;
    for (int64_t p = 0; p < count; ++p, x += x_step, y += out_c) {
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
  }
#pragma GCC unroll 6
  for (int i = 0; i < IC; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < OCV; ++v) {
      double* at = dw + i * out_c + kLanes * v;
      __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(acc[i][v]));
      __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(acc[i][v], 1));
      if (!c.first) {
        lo = _mm256_add_pd(lo, _mm256_loadu_pd(at));
        hi = _mm256_add_pd(hi, _mm256_loadu_pd(at + 4));
      }
      _mm256_storeu_pd(at, lo);
      _mm256_storeu_pd(at + 4, hi);
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

// The tile functions by [input channels - 1][output vectors - 1].
constexpr TileFn kTileFns[kMaxIcTile][kMaxOcVectors] = {
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
  // Output vectors outermost, taps innermost: consecutive tiles read the same channels of the
  // chunk, which stay in L1/L2 while the taps go by; each thread's share is a run of them.
  for (int64_t oc0 = 0; oc0 < d.out_channels; oc0 += kLanes * kMaxOcVectors)
    for (int64_t ic0 = 0; ic0 < d.in_channels; ic0 += kMaxIcTile)
      for (size_t tap = 0; tap < taps_.size(); ++tap)
        tiles_.push_back(
            {static_cast<int>(tap), ic0, oc0,
             static_cast<int>(std::min<int64_t>(kMaxIcTile, d.in_channels - ic0)),
             static_cast<int>(std::min<int64_t>(kMaxOcVectors, (d.out_channels - oc0) / kLanes))});
  chunk_rows_ = std::max<int64_t>(1, kChunkPoints / d.out_size[2]);
}

size_t DirectWeightGrad3d::scratch_bytes() const {
  return taps_.size() * static_cast<size_t>(d_.in_channels * d_.out_channels) * sizeof(double);
}

void DirectWeightGrad3d::run(const void* src, const void* diff_dst, float* diff_weights,
                             void* scratch) {
#if defined(__x86_64__)
  auto* partial = static_cast<double*>(scratch);
  const auto* x = static_cast<const float*>(src);
  const auto* y = static_cast<const float*>(diff_dst);
  const int64_t rows = d_.n * d_.out_size[0] * d_.out_size[1];
  const auto tiles = static_cast<int64_t>(tiles_.size());
  // Static schedules with the same iteration count give each thread the same tiles in every
  // chunk (OpenMP's rule for loops bound to one parallel region), so no barrier between chunks.
#pragma omp parallel
  for (int64_t row0 = 0; row0 < rows; row0 += chunk_rows_) {
    const int64_t oh_n = d_.out_size[1], od_n = d_.out_size[0];
    const Chunk c{x,
                  y,
                  partial,
                  row0,
                  std::min(rows, row0 + chunk_rows_),
                  row0 / (oh_n * od_n),
                  (row0 / oh_n) % od_n,
                  row0 % oh_n,
                  row0 == 0};
#pragma omp for schedule(static) nowait
    for (int64_t k = 0; k < tiles; ++k) {
      const Tile& t = tiles_[static_cast<size_t>(k)];
      kTileFns[t.ic_count - 1][t.oc_vectors - 1](d_, taps_[static_cast<size_t>(t.tap)], t, c);
    }
  }
  // [tap][in][out] in double -> crest's [out][in][tap] in float.
  const auto taps = static_cast<int64_t>(taps_.size());
  const int64_t in_c = d_.in_channels, out_c = d_.out_channels;
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
