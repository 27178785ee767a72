// The spatial split's per-layer table, run under mpirun (tests/spatial/main.cpp): every rank
// computes the unsplit layer itself from the same seeded data, then its part of the split layer,
// and compares its owned rows — forward output, input gradient and, summed over the group, the
// weight and bias gradients. float64 on the reference backend within 1e-10; float32 on oneDNN
// (its blocked kernels behind the plain-layout bridge) within 1e-5 relative.
//
// Each case runs every decomposition of the world's size over its spatial axes (2 ranks: 2 along
// each axis; 4 ranks: 4 along one axis, and 2 x 2 over each pair), with uneven extents,
// kernels 1/3/5, strides 1/2, dilations 1/2, 'same' and 'valid' padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../support/counting_backend.hpp"
#include "../support/scoped_env.hpp"
#include "crest/backends/kernels.hpp"
#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/spatial/spatial_window.hpp"
#include "world.hpp"

namespace crest {
namespace {

using test::has_backend;
using test::random_values;

// Values as the bytes of `dtype` (float64 or float32), and back.
std::vector<std::byte> as_bytes(const std::vector<double>& v, DType dtype) {
  std::vector<std::byte> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::f64) {
      std::memcpy(out.data() + i * 8, &v[i], 8);
    } else {
      const auto f = static_cast<float>(v[i]);
      std::memcpy(out.data() + i * 4, &f, 4);
    }
  }
  return out;
}
std::vector<double> as_values(const std::vector<std::byte>& b, DType dtype) {
  std::vector<double> v(b.size() / dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::f64) {
      std::memcpy(&v[i], b.data() + i * 8, 8);
    } else {
      float f = 0;
      std::memcpy(&f, b.data() + i * 4, 4);
      v[i] = f;
    }
  }
  return v;
}

int64_t count_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// This rank's block of a whole [n, c, spatial...] tensor: rows `ranges` along the spatial dims.
std::vector<std::byte> owned_block(const std::vector<std::byte>& whole,
                                   const std::vector<int64_t>& dims,
                                   const std::vector<IndexRange>& ranges, DType dtype) {
  std::vector<int64_t> start(dims.size(), 0), count = dims;
  for (size_t a = 0; a < ranges.size(); ++a) {
    start[a + 2] = ranges[a].begin;
    count[a + 2] = ranges[a].size();
  }
  std::vector<std::byte> out(static_cast<size_t>(count_of(count)) * dtype_size(dtype));
  box_transfer(whole.data(), BoxAt{dims, start}, out.data(),
               BoxAt{count, std::vector<int64_t>(count.size(), 0)}, count, dtype, BoxOp::copy);
  return out;
}

// |got - want| <= tol * (1 + max |want|) everywhere.
void expect_close(const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                  DType dtype, double tol, const std::string& what) {
  const auto g = as_values(got, dtype), w = as_values(want, dtype);
  ASSERT_EQ(g.size(), w.size()) << what;
  double scale = 0, worst = 0;
  for (double x : w) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - w[i]));
  EXPECT_LE(worst, tol * (1 + scale)) << what << " (rank " << test::world().rank() << ")";
}

// A [n, c, spatial...] array (plain) in `layout`: plain as it is, channels-last as
// [n, spatial..., c]; `back` undoes it.
std::vector<std::byte> in_layout(const std::vector<std::byte>& v, const std::vector<int64_t>& dims,
                                 Layout layout, DType dtype, bool back = false) {
  if (layout == Layout::plain) return v;
  const int64_t n = dims[0], c = dims[1], s = count_of(dims) / (n * c);
  const size_t e = dtype_size(dtype);
  std::vector<std::byte> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t j = 0; j < s; ++j) {
        const auto plain_at = static_cast<size_t>((i * c + k) * s + j) * e;
        const auto last_at = static_cast<size_t>((i * s + j) * c + k) * e;
        std::memcpy(out.data() + (back ? plain_at : last_at),
                    v.data() + (back ? last_at : plain_at), e);
      }
  return out;
}

// The group sum of a rank's partial gradient.
void group_sum(std::vector<std::byte>& v, DType dtype, Communicator& group) {
  auto values = as_values(v, dtype);
  group.allreduce_sum(values.data(), values.size());
  v = as_bytes(values, dtype);
}

std::vector<int64_t> dims_of(int64_t n, int64_t c, const std::array<int64_t, 3>& size, int rank) {
  std::vector<int64_t> d{n, c};
  for (size_t i = 0; i < static_cast<size_t>(rank); ++i) d.push_back(size[i]);
  return d;
}

// Every way to split `spatial_rank` axes among `ranks`, using at most two axes.
std::vector<std::vector<int>> decompositions(int spatial_rank, int ranks) {
  std::vector<std::vector<int>> out;
  for (int a = 0; a < spatial_rank; ++a) {
    std::vector<int> one(static_cast<size_t>(spatial_rank), 1);
    one[static_cast<size_t>(a)] = ranks;
    out.push_back(one);
    if (ranks % 2 == 0 && ranks > 2)
      for (int b = a + 1; b < spatial_rank; ++b) {
        std::vector<int> two(static_cast<size_t>(spatial_rank), 1);
        two[static_cast<size_t>(a)] = 2;
        two[static_cast<size_t>(b)] = ranks / 2;
        out.push_back(two);
      }
  }
  if (spatial_rank == 3 && ranks == 8) out.push_back({2, 2, 2});  // corners
  return out;
}

std::string str(const std::vector<int>& parts) {
  std::string s = "[";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? "," : "") + std::to_string(parts[i]);
  return s + "]";
}

// Extents, kernel, stride, dilation per case; padding 'same' (as Keras) or 'valid'.
struct Window {
  std::vector<int64_t> in;
  int64_t kernel = 3, stride = 1, dilation = 1;
  bool same = true;
};
template <typename Desc>
void fill_window(Desc& d, const Window& w, const std::array<int64_t, 3>& dilation) {
  d.spatial_rank = static_cast<int>(w.in.size());
  for (size_t i = 0; i < w.in.size(); ++i) {
    const int64_t span = dilation[i] * (w.kernel - 1) + 1;
    d.in_size[i] = w.in[i];
    d.kernel[i] = w.kernel;
    d.stride[i] = w.stride;
    if (w.same) {
      d.out_size[i] = (w.in[i] + w.stride - 1) / w.stride;
      const int64_t total = std::max<int64_t>((d.out_size[i] - 1) * w.stride + span - w.in[i], 0);
      d.pad_lo[i] = total / 2;
      d.pad_hi[i] = total - total / 2;
    } else {
      d.out_size[i] = (w.in[i] - span) / w.stride + 1;
    }
  }
}

ConvDesc conv_desc(const Window& w, DType dtype, int64_t in_channels = 3,
                   int64_t out_channels = 5) {
  ConvDesc d;
  d.n = 2;
  d.in_channels = in_channels;
  d.out_channels = out_channels;
  d.dtype = dtype;
  for (size_t i = 0; i < w.in.size(); ++i) d.dilation[i] = w.dilation;
  fill_window(d, w, d.dilation);
  return d;
}

// Whether `where` can split the layer; a split the plan refuses must say why in the user's terms.
bool splittable(const std::vector<WindowAxis>& axes, const SpatialPlacement& where) {
  try {
    plan_window(axes, where);
    return true;
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("dist.spatial"), std::string::npos) << e.what();
    return false;
  }
}

// How many decompositions of a table ran split, how many of those overlapped their halo
// exchange with compute (each runs with dist.halo_overlap off and always), and how many took
// the input gradient from the output gradient's halo (each also runs returning the window's,
// with dist.halo_overlap always).
struct SplitsRun {
  int ran = 0, overlapped = 0, from_output = 0;
  // Of the overlapped, those whose rows move along two and along three axes (a shell, with
  // edge and corner neighbours).
  int overlapped_two = 0, overlapped_three = 0;
  SplitsRun& operator+=(const SplitsRun& o) {
    ran += o.ran;
    overlapped += o.overlapped;
    overlapped_two += o.overlapped_two;
    overlapped_three += o.overlapped_three;
    from_output += o.from_output;
    return *this;
  }
};

// One convolution: unsplit and split on every decomposition, exchanging then computing and
// overlapping the exchange where the split can, the input gradient from the output gradient's
// halo where the split can and by returning the window's gradient. The split layer keeps its
// blocks in `preferred` layout where its kernel works in it (the compiled program asks for
// channels-last).
SplitsRun check_conv(Backend& backend, const ConvDesc& d, double tol,
                     Layout preferred = Layout::plain) {
  Communicator& world = test::world();
  const DType dtype = d.dtype;
  const auto src_dims = dims_of(d.n, d.in_channels, d.in_size, d.spatial_rank);
  const auto dst_dims = dims_of(d.n, d.out_channels, d.out_size, d.spatial_rank);
  const auto src = as_bytes(random_values(size_t(count_of(src_dims)), 1), dtype);
  const auto diff_dst = as_bytes(random_values(size_t(count_of(dst_dims)), 2), dtype);
  int64_t wcount = d.out_channels * d.in_channels;
  for (int i = 0; i < d.spatial_rank; ++i) wcount *= d.kernel[size_t(i)];
  const auto weights = as_bytes(random_values(size_t(wcount), 3), dtype);
  const auto bias = as_bytes(random_values(size_t(d.out_channels), 4), dtype);

  // The unsplit layer: each rank alone, on a grid of one part.
  auto one = world.split(world.rank(), 0);
  SpatialConv whole(backend, d,
                    {one.get(), SpatialGrid{std::vector<int>(size_t(d.spatial_rank), 1)}, "conv"});
  std::vector<std::byte> dst(diff_dst.size()), diff_src(src.size()), dw(weights.size()),
      db(bias.size());
  Buffer scratch(std::max<size_t>(whole.scratch_bytes(), 64));
  whole.forward(src.data(), weights.data(), bias.data(), dst.data(), scratch.data());
  whole.backward_weights(src.data(), diff_dst.data(), dw.data(), db.data(), scratch.data());
  whole.backward_data(diff_dst.data(), weights.data(), diff_src.data(), scratch.data());

  SplitsRun run;
  for (const auto& parts : decompositions(d.spatial_rank, world.size()))
    for (HaloOverlapMode mode : {HaloOverlapMode::off, HaloOverlapMode::always})
      for (DataGradHalo data_grad : {DataGradHalo::output_gradient, DataGradHalo::return_window}) {
        // The window's gradient returned: overlapped where the split can, else exchanged first.
        if (data_grad == DataGradHalo::return_window && mode == HaloOverlapMode::off) continue;
        HaloTiming timing;
        const SpatialPlacement where{&world, SpatialGrid{parts}, "conv", mode, &timing, data_grad};
        if (!splittable(window_axes(d), where)) continue;
        const bool from_output = data_grad == DataGradHalo::output_gradient;
        SCOPED_TRACE("split " + str(parts) + ", dist.halo_overlap " + halo_overlap_name(mode) +
                     (from_output ? ", output-gradient halo" : ", window gradient returned"));
        const auto plans = plan_window(window_axes(d), where);
        std::vector<IndexRange> in_rows, out_rows;
        for (const auto& p : plans) {
          in_rows.push_back(p.owned_in);
          out_rows.push_back(p.owned_out);
        }
        SpatialConv part(backend, d, where, preferred);
        const Layout src_layout = part.src_block_format().layout;
        const Layout dst_layout = part.dst_block_format().layout;
        const auto my_src_plain = owned_block(src, src_dims, in_rows, dtype);
        const auto my_diff_dst_plain = owned_block(diff_dst, dst_dims, out_rows, dtype);
        const auto my_src =
            in_layout(my_src_plain, part.src_block_format().shape.to_vector(), src_layout, dtype);
        const auto my_diff_dst = in_layout(
            my_diff_dst_plain, part.dst_block_format().shape.to_vector(), dst_layout, dtype);
        std::vector<std::byte> my_dst(my_diff_dst.size()), my_diff_src(my_src.size()),
            my_dw(weights.size()), my_db(bias.size());
        Buffer my_scratch(std::max<size_t>(part.scratch_bytes(), 64));
        // As ConvLayer calls them: the weights first, while the output gradient's halo travels.
        part.forward(my_src.data(), weights.data(), bias.data(), my_dst.data(), my_scratch.data());
        part.backward_weights(my_src.data(), my_diff_dst.data(), my_dw.data(), my_db.data(),
                              my_scratch.data());
        part.backward_data(my_diff_dst.data(), weights.data(), my_diff_src.data(),
                           my_scratch.data());
        group_sum(my_dw, dtype, world);
        group_sum(my_db, dtype, world);
        const auto out_plain = in_layout(my_dst, part.dst_block_format().shape.to_vector(),
                                         dst_layout, dtype, /*back=*/true);
        const auto diff_src_plain =
            in_layout(my_diff_src, part.src_block_format().shape.to_vector(), src_layout, dtype,
                      /*back=*/true);
        expect_close(out_plain, owned_block(dst, dst_dims, out_rows, dtype), dtype, tol, "output");
        expect_close(diff_src_plain, owned_block(diff_src, src_dims, in_rows, dtype), dtype, tol,
                     "input gradient");
        expect_close(my_dw, dw, dtype, tol, "weight gradient");
        expect_close(my_db, db, dtype, tol, "bias gradient");
        // Every exchange is timed; what the layer waited for is part of the exchange's time.
        EXPECT_EQ(timing.exchanges > 0, part.halo().moves_rows());
        EXPECT_LE(timing.exposed_s, timing.transfer_s + 1e-9);
        if (!from_output) {
          EXPECT_FALSE(part.data_grad_from_output());
        }
        if (mode == HaloOverlapMode::off && from_output) {
          EXPECT_FALSE(part.overlapped()) << part.overlap_note();
          ++run.ran;
          run.from_output += part.data_grad_from_output();
        }
        if (part.overlapped() && from_output) {
          ++run.overlapped;
          run.overlapped_two += part.halo().moving_axes().size() == 2;
          run.overlapped_three += part.halo().moving_axes().size() == 3;
        }
      }
  return run;
}

// The table's windows: 3-D volumes with odd extents (CosmoFlow's 3x3x3 and 2x2x2-pool family) and
// 2-D fields (DeepCAM's strided and dilated 3x3s).
std::vector<Window> conv_windows() {
  std::vector<Window> out;
  for (int64_t k : {1, 3, 5})
    for (int64_t s : {1, 2})
      for (int64_t dil : {1, 2})
        for (bool same : {true, false}) {
          if (k == 1 && dil == 2) continue;  // a 1-tap window has nothing to dilate
          out.push_back({{13, 11, 10}, k, s, dil, same});
          out.push_back({{21, 19}, k, s, dil, same});
        }
  return out;
}

// Most splits overlap (kernels 1 move no rows; a 5-wide window on 3-row blocks leaves no
// interior), splits along two or three axes (4 and 8 ranks) among them, and most take the input
// gradient from the output gradient's halo (not where no rows move, nor where the reversed
// window would need negative padding: 1x1 stride 2); a table where few do proves nothing.
void expect_coverage(const SplitsRun& run, const char* what) {
  if (test::world().size() == 1) return;  // nothing is split
  std::printf(
      "%s: %d splits ran on %d ranks; on rank %d, %d of them also overlapped (%d along two "
      "axes, %d along three) and %d took the input gradient from the output gradient's halo\n",
      what, run.ran, test::world().size(), test::world().rank(), run.overlapped, run.overlapped_two,
      run.overlapped_three, run.from_output);
  EXPECT_GE(run.overlapped, run.ran / 10) << "too few splits overlapped their halo exchange";
  // Over the job: a rank at a grid's edge may have no interior where another has.
  int64_t shells[2] = {run.overlapped_two, run.overlapped_three};
  test::world().allreduce_sum(shells, 2);
  if (test::world().size() >= 4) {
    EXPECT_GT(shells[0], 0) << "no split along two axes overlapped its exchange";
  }
  if (test::world().size() == 8) {
    EXPECT_GT(shells[1], 0) << "no split along three axes overlapped its exchange";
  }
  EXPECT_GE(run.from_output, run.ran / 2) << "too few splits gathered the output gradient";
}

void run_conv_table(Backend& backend, DType dtype, double tol) {
  SplitsRun run;
  int cases = 0;
  for (const Window& w : conv_windows()) {
    SCOPED_TRACE("conv rank " + std::to_string(w.in.size()) + " k " + std::to_string(w.kernel) +
                 " s " + std::to_string(w.stride) + " d " + std::to_string(w.dilation) +
                 (w.same ? " same" : " valid"));
    run += check_conv(backend, conv_desc(w, dtype), tol);
    ++cases;
  }
  // Most splits are legal at these extents: a table that refuses everything proves nothing.
  EXPECT_GE(run.ran, cases) << "too few decompositions ran";
  expect_coverage(run, "convolution");
}

// Transposed convolutions (DeepCAM's decoder: kernel 3, stride 2, padding 1, output padding 1):
// input extent, kernel, stride, dilation, padding, output padding.
struct TransposedWindow {
  std::vector<int64_t> in;
  int64_t kernel = 3, stride = 2, dilation = 1, pad = 1, out_pad = 1;
};

ConvDesc conv_transpose_desc(const TransposedWindow& w, DType dtype) {
  ConvDesc d;
  d.n = 2;
  d.in_channels = 3;
  d.out_channels = 5;
  d.dtype = dtype;
  d.transposed = true;
  d.spatial_rank = static_cast<int>(w.in.size());
  for (size_t i = 0; i < w.in.size(); ++i) {
    d.in_size[i] = w.in[i];
    d.kernel[i] = w.kernel;
    d.stride[i] = w.stride;
    d.dilation[i] = w.dilation;
    d.pad_lo[i] = w.pad;
    d.pad_hi[i] = w.pad - w.out_pad;
    d.out_size[i] =
        (w.in[i] - 1) * w.stride - 2 * w.pad + w.dilation * (w.kernel - 1) + 1 + w.out_pad;
  }
  return d;
}

void run_conv_transpose_table(Backend& backend, DType dtype, double tol) {
  SplitsRun run;
  int cases = 0;
  for (const TransposedWindow& w :
       {TransposedWindow{{7, 6, 5}}, TransposedWindow{{11, 9}},
        TransposedWindow{{11, 9}, 3, 1, 1, 1, 0}, TransposedWindow{{11, 9}, 4, 2, 1, 1, 0},
        TransposedWindow{{11, 9}, 5, 2, 1, 2, 1}, TransposedWindow{{7, 6, 5}, 2, 2, 1, 0, 0},
        TransposedWindow{{11, 9}, 3, 3, 2, 1, 1}}) {
    SCOPED_TRACE("conv_transpose rank " + std::to_string(w.in.size()) + " k " +
                 std::to_string(w.kernel) + " s " + std::to_string(w.stride) + " d " +
                 std::to_string(w.dilation) + " p " + std::to_string(w.pad) + " op " +
                 std::to_string(w.out_pad));
    run += check_conv(backend, conv_transpose_desc(w, dtype), tol);
    ++cases;
  }
  EXPECT_GE(run.ran, cases) << "too few decompositions ran";
  expect_coverage(run, "transposed convolution");
}

TEST(SpatialLayerTable, TransposedConvolutionFloat64OnTheReferenceBackend) {
  run_conv_transpose_table(*make_backend("reference"), DType::f64, 1e-10);
}

TEST(SpatialLayerTable, TransposedConvolutionFloat32OnOneDnn) {
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  run_conv_transpose_table(*make_backend("onednn"), DType::f32, 1e-5);
}

TEST(SpatialLayerTable, ConvolutionFloat64OnTheReferenceBackend) {
  run_conv_table(*make_backend("reference"), DType::f64, 1e-10);
}

TEST(SpatialLayerTable, ConvolutionFloat32OnOneDnn) {
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  run_conv_table(*make_backend("onednn"), DType::f32, 1e-5);
}

// CosmoFlow's channel counts (4 -> 32, 32 -> 64, 64 -> 128) on small volumes, with the blocks
// channels-last as the compiled program asks.
SplitsRun run_cosmoflow_counts(Backend& backend, double tol) {
  SplitsRun run;
  for (const auto& [in_c, out_c] : {std::pair{4, 32}, std::pair{32, 64}, std::pair{64, 128}})
    for (const Window& w : {Window{{16, 8, 8}}, Window{{8, 4, 4}}, Window{{13, 6, 5}}}) {
      SCOPED_TRACE("conv " + std::to_string(in_c) + " -> " + std::to_string(out_c) + " on " +
                   std::to_string(w.in[0]) + "x" + std::to_string(w.in[1]) + "x" +
                   std::to_string(w.in[2]));
      run += check_conv(backend, conv_desc(w, DType::f32, in_c, out_c), tol, Layout::channels_last);
    }
  return run;
}

// On oneDNN's direct kernels (CREST_WINOGRAD=0), which at these counts differ for windows of
// different depth (channels-last brgconv, blocked nCdhw8c jit): ranks of one group may run
// different kernel formats of one layer, and every rank keeps channels-last blocks (a reorder
// runs around a blocked kernel), so the halo's rows mean the same on both sides and the layers
// between get channels-last tensors.
TEST(SpatialLayerTable, CosmoFlowChannelCountsChannelsLastOnOneDnn) {
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  const test::ScopedEnv direct("CREST_WINOGRAD", "0");
  auto backend = make_backend("onednn");
  const SplitsRun run = run_cosmoflow_counts(*backend, 1e-5);
  EXPECT_GE(run.ran, 9) << "too few decompositions ran";
  expect_coverage(run, "CosmoFlow channel counts");
  Communicator& world = test::world();
  for (const auto& parts : decompositions(3, world.size())) {
    const SpatialPlacement where{&world, SpatialGrid{parts}, "conv"};
    const ConvDesc d = conv_desc(Window{{13, 6, 5}}, DType::f32, 32, 64);
    if (!splittable(window_axes(d), where)) continue;
    const SpatialConv part(*backend, d, where, Layout::channels_last);
    EXPECT_EQ(part.src_block_format().layout, Layout::channels_last) << str(parts);
    EXPECT_EQ(part.dst_block_format().layout, Layout::channels_last) << str(parts);
  }
}

// By the rule, as a training run: from 32 channels the split convolutions (which keep their
// bias gradient) run Winograd F(4x4x4, 3x3x3) on the windows, whose tiles start at the window's
// first row, not the whole volume's. Each tiling errs up to 2.3e-5 relative
// (OneDnnWinograd.Volumes*), so the split and the unsplit layer differ by up to twice that:
// measured 3.0e-5 (the input gradient of 32 -> 64 on 16x8x8), held to 1e-4.
TEST(SpatialLayerTable, CosmoFlowChannelCountsByWinogradOnOneDnn) {
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  auto backend = make_backend("onednn");
  const SplitsRun run = run_cosmoflow_counts(*backend, 1e-4);
  EXPECT_GE(run.ran, 9) << "too few decompositions ran";
}

// A boundary window is a small, oddly padded problem, for which oneDNN may have only its
// reference code (DeepCAM's transposed convolutions' weight gradient on 2-row boundaries took
// 2 s against 0.1 s for the whole layer). Such a layer exchanges, then computes, and says why.
TEST(SpatialLayerTable, BoundaryKernelsOnReferenceCodeAreNotOverlapped) {
  Communicator& world = test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a split";
  const ConvDesc d = conv_desc(Window{{4 * int64_t{world.size()}, 6, 5}}, DType::f64);
  const SpatialPlacement where{&world, SpatialGrid{{world.size(), 1, 1}}, "conv",
                               HaloOverlapMode::always};
  test::CountingBackend backend;
  EXPECT_TRUE(SpatialConv(backend, d, where).overlapped());
  // A boundary output row reads at most 3 rows; the whole kernel's window has 5 or more.
  backend.names_reference_code = [](const ConvDesc& c) { return c.in_size[0] <= 3; };
  const SpatialConv part(backend, d, where);
  EXPECT_FALSE(part.overlapped());
  EXPECT_EQ(part.overlap_note(),
            "not overlapped: a boundary kernel would run oneDNN's reference code "
            "(conv:any+ref:any)");
}

// The input gradient from the output gradient's halo: rank r of a depth split owns input rows
// [4r, 4r + 4) of 4 * world rows; a 3-wide 'same' window's output-gradient rows reaching them are
// [4r - 1, 4r + 5) within the volume, so the data-gradient kernel runs from the 4 owned rows to
// those (padding 2 where a neighbour's row sits, 1 at the volume's edge), and no other kernel
// computes the gradient of a halo row.
TEST(SpatialLayerTable, DataGradientKernelComputesOnlyTheOwnedRows) {
  Communicator& world = test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a split";
  const int r = world.rank(), last = world.size() - 1;
  const ConvDesc d = conv_desc(Window{{4 * int64_t{world.size()}, 6, 5}}, DType::f64);
  const SpatialPlacement where{&world, SpatialGrid{{world.size(), 1, 1}}, "conv",
                               HaloOverlapMode::off};
  test::CountingBackend backend;
  const SpatialConv part(backend, d, where);
  ASSERT_TRUE(part.data_grad_from_output()) << part.data_grad_note();
  EXPECT_EQ(part.data_grad_note(),
            "from the output gradient's halo, exchanged before its kernel (dist.halo_overlap off)");
  ASSERT_EQ(backend.convs_made.size(), 2u);
  const ConvDesc& g = backend.convs_made[1];
  EXPECT_EQ(g.in_size[0], 4);
  EXPECT_EQ(g.out_size[0], 4 + (r > 0) + (r < last));
  EXPECT_EQ(g.pad_lo[0], r > 0 ? 2 : 1);
  EXPECT_EQ(g.pad_hi[0], r < last ? 2 : 1);
  EXPECT_EQ(g.out_size[1], 6);  // an axis of one part keeps the whole convolution's extents
  EXPECT_EQ(g.pad_lo[1], 1);
}

// Where the reversed window cannot be planned (a 1x1 stride-2 convolution reads every other
// row, so a rank's first input row may be one no output reads: negative padding), or where the
// data-gradient kernel would be reference code when the forward's is not, the window's gradient
// is returned instead, and the layer says why.
TEST(SpatialLayerTable, DataGradientFallsBackToReturningTheWindowGradient) {
  Communicator& world = test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a split";
  const SpatialPlacement where{&world, SpatialGrid{{world.size(), 1, 1}}, "conv",
                               HaloOverlapMode::off};
  test::CountingBackend backend;
  const ConvDesc strided =
      conv_desc(Window{{4 * int64_t{world.size()} + 1, 6, 5}, 1, 2}, DType::f64);
  const SpatialConv one_by_one(backend, strided, where);
  EXPECT_FALSE(one_by_one.data_grad_from_output());
  EXPECT_NE(one_by_one.data_grad_note().find("negative padding"), std::string::npos)
      << one_by_one.data_grad_note();

  const ConvDesc d = conv_desc(Window{{4 * int64_t{world.size()}, 6, 5}}, DType::f64);
  // The data-gradient kernel's output (the output-gradient window) is wider than its input.
  backend.names_reference_code = [](const ConvDesc& c) { return c.out_size[0] > c.in_size[0]; };
  const SpatialConv part(backend, d, where);
  EXPECT_FALSE(part.data_grad_from_output());
  EXPECT_EQ(part.data_grad_note(),
            "its kernel would run oneDNN's reference code (conv:any+ref:any)");
}

// One pooling layer, as check_conv.
SplitsRun check_pool(Backend& backend, const Window& w, PoolKind kind, DType dtype, double tol) {
  Communicator& world = test::world();
  PoolDesc d;
  d.kind = kind;
  d.n = 2;
  d.channels = 3;
  d.dtype = dtype;
  fill_window(d, w, {1, 1, 1});
  const auto src_dims = dims_of(d.n, d.channels, d.in_size, d.spatial_rank);
  const auto dst_dims = dims_of(d.n, d.channels, d.out_size, d.spatial_rank);
  const auto src = as_bytes(random_values(size_t(count_of(src_dims)), 5), dtype);
  const auto diff_dst = as_bytes(random_values(size_t(count_of(dst_dims)), 6), dtype);

  auto one = world.split(world.rank(), 0);
  SpatialPool whole(backend, d,
                    {one.get(), SpatialGrid{std::vector<int>(size_t(d.spatial_rank), 1)}, "pool"});
  std::vector<std::byte> dst(diff_dst.size()), diff_src(src.size());
  Buffer scratch(std::max<size_t>(whole.scratch_bytes(), 64));
  Buffer workspace(std::max<size_t>(whole.workspace_bytes(), 64));
  whole.forward(src.data(), dst.data(), workspace.data(), scratch.data());
  whole.backward(diff_dst.data(), workspace.data(), diff_src.data(), scratch.data());

  SplitsRun run;
  for (const auto& parts : decompositions(d.spatial_rank, world.size()))
    for (HaloOverlapMode mode : {HaloOverlapMode::off, HaloOverlapMode::always}) {
      const SpatialPlacement where{&world, SpatialGrid{parts}, "pool", mode};
      if (!splittable(window_axes(d), where)) continue;
      SCOPED_TRACE("split " + str(parts) + ", dist.halo_overlap " + halo_overlap_name(mode));
      std::vector<IndexRange> in_rows, out_rows;
      for (const auto& p : plan_window(window_axes(d), where)) {
        in_rows.push_back(p.owned_in);
        out_rows.push_back(p.owned_out);
      }
      SpatialPool part(backend, d, where);
      const auto my_src = owned_block(src, src_dims, in_rows, dtype);
      const auto my_diff_dst = owned_block(diff_dst, dst_dims, out_rows, dtype);
      std::vector<std::byte> my_dst(my_diff_dst.size()), my_diff_src(my_src.size());
      Buffer my_scratch(std::max<size_t>(part.scratch_bytes(), 64));
      Buffer my_workspace(std::max<size_t>(part.workspace_bytes(), 64));
      part.forward(my_src.data(), my_dst.data(), my_workspace.data(), my_scratch.data());
      part.backward(my_diff_dst.data(), my_workspace.data(), my_diff_src.data(), my_scratch.data());
      expect_close(my_dst, owned_block(dst, dst_dims, out_rows, dtype), dtype, tol, "output");
      expect_close(my_diff_src, owned_block(diff_src, src_dims, in_rows, dtype), dtype, tol,
                   "input gradient");
      if (mode == HaloOverlapMode::off) {
        EXPECT_FALSE(part.overlapped()) << part.overlap_note();
        ++run.ran;
      }
      run.overlapped += part.overlapped();
    }
  return run;
}

void run_pool_table(Backend& backend, DType dtype, double tol) {
  SplitsRun run;
  int cases = 0;
  // CosmoFlow's 2x2x2 stride 2 (on even blocks too, where no rows move and the kernel runs on
  // the block itself), DeepCAM's 3x3 stride 2 'same', a 3-wide stride-1 window.
  const Window windows[] = {{{13, 11, 10}, 2, 2, 1, false},
                            {{12, 8, 8}, 2, 2, 1, false},
                            {{13, 11, 10}, 3, 1, 1, true},
                            {{21, 19}, 3, 2, 1, true},
                            {{21, 19}, 2, 2, 1, false}};
  for (PoolKind kind : {PoolKind::max, PoolKind::avg_include_pad, PoolKind::avg_exclude_pad})
    for (const Window& w : windows) {
      SCOPED_TRACE(std::string(enum_name(kind)) + " rank " + std::to_string(w.in.size()) + " k " +
                   std::to_string(w.kernel) + " s " + std::to_string(w.stride));
      run += check_pool(backend, w, kind, dtype, tol);
      ++cases;
    }
  std::printf(
      "pooling: %d splits of %d windows ran on %d ranks; on rank %d, %d of them also "
      "overlapped\n",
      run.ran, cases, test::world().size(), test::world().rank(), run.overlapped);
  EXPECT_GE(run.ran, cases) << "too few decompositions ran";
  // Even blocks of a 2-wide stride-2 window move no rows; the 3-wide windows overlap.
  if (test::world().size() > 1) {
    EXPECT_GE(run.overlapped, run.ran / 4) << "too few pooling splits overlapped";
  }
}

TEST(SpatialLayerTable, PoolingFloat64OnTheReferenceBackend) {
  run_pool_table(*make_backend("reference"), DType::f64, 1e-10);
}

TEST(SpatialLayerTable, PoolingFloat32OnOneDnn) {
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  run_pool_table(*make_backend("onednn"), DType::f32, 1e-5);
}

}  // namespace
}  // namespace crest
