// The Winograd F(4x4, 3x3), F(4x4, 5x5) and F(4x4x4, 3x3x3) convolutions
// (src/backends/onednn/winograd_conv.hpp) against the reference backend's direct convolution, all
// three passes: "same" padding, no padding (edge
// tiles past the output), asymmetric padding on either side, maps that are not multiples of the
// 4x4 tile, a map smaller than one tile, a bias, chunks of tiles, and dilation (phases of
// unequal length). Also: which convolutions it takes, and that the onednn backend's conv runs it.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "backend/backend_test_util.hpp"
#include "crest/core/bf16.hpp"
#include "onednn/context.hpp"
#include "onednn/lane_addressing.hpp"
#include "onednn/onednn_backend.hpp"
#include "onednn/winograd_conv.hpp"
#include "support/scoped_env.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

using testing::expect_close;
using testing::FormattedBuffer;
using testing::random_floats;

struct Case {
  int64_t n = 2, ic = 128, oc = 144, h = 7, w = 9;
  std::array<int64_t, 4> pad{1, 1, 1, 1};  // top, bottom, left, right
  std::array<int64_t, 2> dilation{1, 1};   // rows, columns
  bool bias = false;
  bool bias_grad = false;    // wanted from the kernel (a split convolution's); else routed away
  DType dtype = DType::f32;  // of the activations (weights and their gradient are float32)
  int64_t depth = 0;         // > 0: a 3-D volume of this depth, 3x3x3 (F(4x4x4, 3x3x3))
  std::array<int64_t, 2> pad_depth{1, 1};  // front, back (3-D)
  EltwiseKind act = EltwiseKind::none;     // fused into the forward (leaky: slope 0.3)
  int64_t kernel = 3;                      // 2-D: 3x3 or 5x5
};

int64_t taps(const Case& c) { return c.depth > 0 ? 27 : c.kernel * c.kernel; }

ConvDesc desc(const Case& c) {
  ConvDesc d;
  d.spatial_rank = 2;
  d.n = c.n;
  d.in_channels = c.ic;
  d.out_channels = c.oc;
  d.bias = c.bias;
  d.bias_grad = c.bias && c.bias_grad;
  d.dtype = c.dtype;
  d.in_size = {c.h, c.w, 1};
  d.kernel = {c.kernel, c.kernel, 1};
  d.pad_lo = {c.pad[0], c.pad[2], 0};
  d.pad_hi = {c.pad[1], c.pad[3], 0};
  d.dilation = {c.dilation[0], c.dilation[1], 1};
  d.out_size = {c.h + c.pad[0] + c.pad[1] - (c.kernel - 1) * c.dilation[0],
                c.w + c.pad[2] + c.pad[3] - (c.kernel - 1) * c.dilation[1], 1};
  d.post_op = {c.act, c.act == EltwiseKind::leaky_relu ? 0.3f : 0.f, 0.f};
  if (c.depth > 0) {  // the same rows and columns behind a depth axis
    d.spatial_rank = 3;
    d.in_size = {c.depth, c.h, c.w};
    d.kernel = {3, 3, 3};
    d.pad_lo = {c.pad_depth[0], c.pad[0], c.pad[2]};
    d.pad_hi = {c.pad_depth[1], c.pad[1], c.pad[3]};
    d.dilation = {1, 1, 1};
    d.out_size = {c.depth + c.pad_depth[0] + c.pad_depth[1] - 2, c.h + c.pad[0] + c.pad[1] - 2,
                  c.w + c.pad[2] + c.pad[3] - 2};
  }
  return d;
}

Shape src_shape_of(const ConvDesc& d) {
  if (d.spatial_rank == 3) return {d.n, d.in_channels, d.in_size[0], d.in_size[1], d.in_size[2]};
  return {d.n, d.in_channels, d.in_size[0], d.in_size[1]};
}

Shape dst_shape_of(const ConvDesc& d) {
  if (d.spatial_rank == 3)
    return {d.n, d.out_channels, d.out_size[0], d.out_size[1], d.out_size[2]};
  return {d.n, d.out_channels, d.out_size[0], d.out_size[1]};
}

std::string name(const Case& c) {
  const std::string depth = c.depth > 0 ? std::to_string(c.depth) + "x" : std::string();
  const std::string pad_depth =
      c.depth > 0 ? std::to_string(c.pad_depth[0]) + "," + std::to_string(c.pad_depth[1]) + ","
                  : std::string();
  return std::to_string(c.n) + "x" + std::to_string(c.ic) + "x" + depth + std::to_string(c.h) +
         "x" + std::to_string(c.w) + " -> " + std::to_string(c.oc) + " pad " + pad_depth +
         std::to_string(c.pad[0]) + "," + std::to_string(c.pad[1]) + "," +
         std::to_string(c.pad[2]) + "," + std::to_string(c.pad[3]) + " dilation " +
         std::to_string(c.dilation[0]) + "x" + std::to_string(c.dilation[1]) +
         (c.kernel != 3 ? " kernel " + std::to_string(c.kernel) : "") + (c.bias ? " bias" : "") +
         (c.bias_grad ? " bias gradient" : "") + (c.act != EltwiseKind::none ? " activation" : "") +
         " " + dtype_name(c.dtype);
}

// Largest |got - want| / (1 + max |want|) of a pass, for the tolerances below.
double worst(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i)
    d = std::max(d, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
  return d / (1 + testing::max_abs(want));
}

// Measured with these inputs (uniform in [-1, 1], 128-144 channels): up to 1.3e-5 in the
// forward and data gradient and 2e-6 in the weight gradient (1.6e-5 forward at 448 input
// channels), where oneDNN's direct kernel stays near 1e-7: F(4x4, 3x3)'s transforms scale values
// by up to 8 and 1/24 before the sums. The bound leaves room for more channels and other vector
// widths.
constexpr double kPassTolerance = 5e-5;

// bf16 activations: the outputs and the input gradient are rounded to bf16 (8 significant bits),
// so they are held to bf16's rounding (measured: up to 2.6e-3, about half a bf16 ulp at the
// largest values); the weight gradient is float32 from exact inputs, held as tightly (1.6e-6).
constexpr double kBf16OutputTolerance = 1e-2;

// Where element i of a plain (N, C, spatial...) tensor lies in channels-last order.
size_t channels_last_index(const Shape& shape, size_t i) {
  const auto c = static_cast<size_t>(shape[1]);
  const auto spatial = static_cast<size_t>(shape.numel() / (shape[0] * shape[1]));
  const size_t n = i / (c * spatial), ch = i / spatial % c, p = i % spatial;
  return (n * spatial + p) * c + ch;
}

// bf16 codes in the kernel's format. Channels-last is permuted here, so the bf16 paths run on CPUs
// whose oneDNN refuses bf16 reorders (no AVX512_BF16: crest's loops need no bf16 instructions);
// a blocked format goes through the backend's reorder.
bool test_permutes(const MemFormat& f) {
  return f.dtype == DType::bf16 && f.layout == Layout::channels_last;
}

// A tensor in the kernel's format and dtype, from plain float32 values (bf16 through their codes:
// the backend's reorder changes layouts, not types). Starts as garbage when `plain` is empty, so
// a kernel that fails to write every element is caught.
Buffer in_format(Backend& dnn, const MemFormat& f, const std::vector<float>& plain = {}) {
  Buffer out(std::max<size_t>(f.bytes, 4));
  std::memset(out.data(), 0x7f, out.bytes());
  if (plain.empty()) return out;
  const MemFormat p = plain_format(f.shape, f.dtype);
  if (f.dtype == DType::bf16) {
    std::vector<uint16_t> codes(plain.size());
    for (size_t i = 0; i < plain.size(); ++i) codes[i] = float_to_bf16(plain[i]);
    if (test_permutes(f)) {
      auto* o = static_cast<uint16_t*>(out.data());
      for (size_t i = 0; i < codes.size(); ++i) o[channels_last_index(f.shape, i)] = codes[i];
    } else {
      dnn.reorder(p, f)->execute(codes.data(), out.data());
    }
  } else {
    dnn.reorder(p, f)->execute(plain.data(), out.data());
  }
  return out;
}

std::vector<float> plain_values(Backend& dnn, const MemFormat& f, const Buffer& b) {
  const auto n = static_cast<size_t>(f.shape.numel());
  const MemFormat p = plain_format(f.shape, f.dtype);
  std::vector<float> out(n);
  if (f.dtype == DType::bf16) {
    std::vector<uint16_t> codes(n);
    if (test_permutes(f)) {
      const auto* in = static_cast<const uint16_t*>(b.data());
      for (size_t i = 0; i < n; ++i) codes[i] = in[channels_last_index(f.shape, i)];
    } else {
      dnn.reorder(f, p)->execute(b.data(), codes.data());
    }
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(codes[i]);
  } else {
    dnn.reorder(f, p)->execute(b.data(), out.data());
  }
  return out;
}

// The fused activation, as the reference applies it after its convolution.
void activate(const Case& c, std::vector<float>& y) {
  if (c.act == EltwiseKind::none) return;
  const float slope = c.act == EltwiseKind::leaky_relu ? 0.3f : 0.f;
  for (float& v : y) v = v > 0 ? v : slope * v;
}

// Why the bf16 tests cannot run here, or empty. They need no bf16 instructions where the kernel
// takes channels-last (AVX2 and below: the test permutes); on AVX-512 it takes oneDNN's blocked
// layout, whose bf16 reorders need AVX512_BF16 or AMX.
std::string bf16_refusal() {
  const Shape blocks{1, 16, 4, 4};
  if (onednn::lane_layout(blocks, DType::bf16).format.layout == Layout::channels_last) return "";
  return test::dtype_refusal("onednn", DType::bf16);
}

void check(const Case& c, int64_t chunk_floats = onednn::kWinogradChunkFloats,
           double tolerance = kPassTolerance) {
  SCOPED_TRACE(name(c));
  const ConvDesc d = desc(c);
  ASSERT_TRUE(onednn::winograd_serves(d));
  ConvDesc ref_desc = d;
  ref_desc.dtype = DType::f32;
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  ref_desc.post_op = {};
  const Shape src_shape = src_shape_of(d), dst_shape = dst_shape_of(d);
  auto rk = ref->conv(ref_desc, plain_format(src_shape, DType::f32));
  auto wk = onednn::make_winograd_conv(std::make_shared<onednn::Context>(), d, chunk_floats);

  auto x = random_floats(static_cast<size_t>(src_shape.numel()), 1);
  const auto w = random_floats(static_cast<size_t>(d.in_channels * d.out_channels * taps(c)), 2);
  const auto b = random_floats(static_cast<size_t>(d.out_channels), 3);
  auto dy = random_floats(static_cast<size_t>(dst_shape.numel()), 4);
  const bool bf16 = c.dtype == DType::bf16;
  if (bf16)  // the reference sees exactly the values the kernel reads
    for (auto* v : {&x, &dy})
      for (float& f : *v) f = bf16_to_float(float_to_bf16(f));
  const double out_tolerance = bf16 ? kBf16OutputTolerance : tolerance;
  Buffer scratch(wk->scratch_bytes());
  // NaN garbage: no pass may rely on zeroed scratch (the weight gradient's first chunk
  // overwrites), and a value read before it is written poisons every sum it enters.
  std::memset(scratch.data(), 0xff, scratch.bytes());

  std::vector<float> y_ref(static_cast<size_t>(dst_shape.numel()));
  rk->forward(x.data(), w.data(), b.data(), y_ref.data(), nullptr);
  activate(c, y_ref);
  const Buffer xs = in_format(*dnn, wk->src_format(), x);
  Buffer ys = in_format(*dnn, wk->dst_format());
  wk->forward(xs.data(), w.data(), c.bias ? b.data() : nullptr, ys.data(), scratch.data());
  const auto y = plain_values(*dnn, wk->dst_format(), ys);
  expect_close(y, y_ref, out_tolerance, "forward");

  std::vector<float> dx_ref(static_cast<size_t>(src_shape.numel()));
  rk->backward_data(dy.data(), w.data(), dx_ref.data(), nullptr);
  const Buffer dys = in_format(*dnn, wk->dst_format(), dy);
  Buffer dxs = in_format(*dnn, wk->src_format());
  wk->backward_data(dys.data(), w.data(), dxs.data(), scratch.data());
  const auto dx = plain_values(*dnn, wk->src_format(), dxs);
  expect_close(dx, dx_ref, out_tolerance, "backward data");

  std::vector<float> dw_ref(w.size()), db_ref(static_cast<size_t>(d.out_channels));
  rk->backward_weights(x.data(), dy.data(), dw_ref.data(), db_ref.data(), nullptr);
  std::vector<float> dw(w.size(), 1e30f), db(db_ref.size(), 1e30f);
  wk->backward_weights(xs.data(), dys.data(), dw.data(), d.bias_grad ? db.data() : nullptr,
                       scratch.data());
  expect_close(dw, dw_ref, tolerance, "backward weights");
  if (d.bias_grad) expect_close(db, db_ref, tolerance, "backward bias");
  std::cout << name(c) << ": worst relative error forward " << worst(y, y_ref) << ", data "
            << worst(dx, dx_ref) << ", weights " << worst(dw, dw_ref) << "\n";
}

TEST(OneDnnWinograd, AgreesWithTheReferenceInEveryPass) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  check({});  // "same" padding, 7x9: edge tiles
  check({.n = 1, .h = 8, .w = 8, .pad = {0, 0, 0, 0}, .bias = true});  // valid: 6x6 output
  // Asymmetric padding, either side.
  check({.n = 1, .ic = 144, .oc = 128, .h = 6, .w = 5, .pad = {2, 0, 0, 2}});
  check({.n = 3, .h = 3, .w = 2});  // smaller than one tile
}

// Chunks of tiles, the last one shorter: 2 x 18 x 21 pixels = 2 x 5 x 6 = 60 tiles, 7 per chunk
// when a chunk's buffers hold 36 x 7 x 144 floats (the widest side), so 8 full chunks and one of 4.
TEST(OneDnnWinograd, ChunksOfTilesAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  check({.n = 2, .h = 18, .w = 21}, int64_t{36} * 7 * 144);
  check({.n = 2, .h = 18, .w = 21}, 1);  // one tile per chunk
}

// Dilated: each phase (rows p, p + d, ...) a dense convolution of its own, phases of unequal
// length, padding up to 2 dilations on either side, unequal dilations, a bias (the first case
// without), and DeepCAM's aspp2 in small (dilation 6 on a 12x18 map: each phase shorter than a
// tile).
TEST(OneDnnWinograd, DilatedAgreesWithTheReference) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  check({.n = 1, .ic = 32, .oc = 16, .pad = {2, 2, 2, 2}, .dilation = {2, 2}, .bias = true});
  check({.n = 2, .ic = 16, .oc = 48, .h = 10, .w = 8, .pad = {6, 0, 0, 3}, .dilation = {3, 3}});
  check({.n = 1, .ic = 16, .oc = 16, .h = 9, .w = 11, .pad = {2, 2, 3, 3}, .dilation = {2, 3}});
  check({.n = 2, .ic = 32, .oc = 16, .h = 12, .w = 18, .pad = {6, 6, 6, 6}, .dilation = {6, 6}});
}

// bf16 activations (DeepCAM's mixed precision): widened on load, float32 arithmetic, rounded on
// store; plain and dilated, with a bias.
TEST(OneDnnWinograd, Bf16ActivationsAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  if (const std::string why = bf16_refusal(); !why.empty()) GTEST_SKIP() << why;
  check({.bias = true, .dtype = DType::bf16});
  const Case dilated{.n = 1, .ic = 32, .oc = 16, .h = 9, .w = 11, .pad = {2, 2, 3, 3}};
  Case c = dilated;
  c.dilation = {2, 3};
  c.dtype = DType::bf16;
  check(c);
}

// F(4x4, 5x5), the Tiramisu's dense layers: "same" padding (2) on maps that are not whole tiles,
// valid and asymmetric padding up to 4 on either side, a map smaller than a tile, a bias with the
// fused ReLU, the growth rate's 32 output channels from a count that ends in a short lane block,
// and chunks of tiles (2 x 3 x 3 = 18 tiles, 4 per chunk).
TEST(OneDnnWinograd, FiveByFiveAgreesWithTheReferenceInEveryPass) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  check({.pad = {2, 2, 2, 2}, .kernel = 5}, onednn::kWinogradChunkFloats, kPassTolerance);
  check({.n = 1, .h = 10, .w = 9, .pad = {0, 0, 0, 0}, .bias = true, .kernel = 5},
        onednn::kWinogradChunkFloats, kPassTolerance);
  check({.n = 1, .ic = 144, .oc = 128, .h = 6, .w = 5, .pad = {4, 0, 0, 4}, .kernel = 5},
        onednn::kWinogradChunkFloats, kPassTolerance);
  check({.n = 3, .h = 3, .w = 2, .pad = {2, 2, 2, 2}, .kernel = 5}, onednn::kWinogradChunkFloats,
        kPassTolerance);
  const Case dense_layer{.n = 2,
                         .ic = 96 + 32 + 8,
                         .oc = 32,
                         .h = 12,
                         .w = 10,
                         .pad = {2, 2, 2, 2},
                         .bias = true,
                         .act = EltwiseKind::relu,
                         .kernel = 5};
  check(dense_layer, onednn::kWinogradChunkFloats, kPassTolerance);
  check(dense_layer, int64_t{64} * 4 * 144, kPassTolerance);
}

// Dilated 5x5 (phases of unequal length, padding up to 4 dilations), short lane blocks, and bf16
// activations with a bias gradient.
TEST(OneDnnWinograd, FiveByFiveDilatedAndBf16AgreeWithTheReference) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  check({.n = 1,
         .ic = 32,
         .oc = 16,
         .h = 11,
         .w = 13,
         .pad = {4, 4, 8, 0},
         .dilation = {2, 3},
         .bias = true,
         .kernel = 5},
        onednn::kWinogradChunkFloats, kPassTolerance);
  check({.n = 2, .ic = 20, .oc = 12, .h = 7, .w = 6, .pad = {2, 2, 2, 2}, .kernel = 5},
        onednn::kWinogradChunkFloats, kPassTolerance);
  if (const std::string why = bf16_refusal(); !why.empty()) GTEST_SKIP() << why;
  check({.n = 2,
         .ic = 48,
         .oc = 32,
         .pad = {2, 2, 2, 2},
         .bias = true,
         .bias_grad = true,
         .dtype = DType::bf16,
         .act = EltwiseKind::relu,
         .kernel = 5},
        onednn::kWinogradChunkFloats, kPassTolerance);
}

// F(4x4x4, 3x3x3) in float32 as CosmoFlow runs it: measured up to 2.3e-5 in any pass with 16-48
// channels, uniform inputs, about the 2-D tiling's error, so the bound is the 2-D one.
TEST(OneDnnWinograd, VolumesAgreeWithTheReferenceInEveryPass) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  // "same" padding, odd extents: edge tiles on every axis; a bias and CosmoFlow's leaky ReLU.
  check({.n = 2,
         .ic = 32,
         .oc = 48,
         .h = 7,
         .w = 6,
         .bias = true,
         .depth = 5,
         .act = EltwiseKind::leaky_relu});
  // Even extents (whole tiles), batch 1 and 3, ReLU, channels not a multiple of 32.
  check({.n = 1, .ic = 48, .oc = 32, .h = 8, .w = 8, .depth = 8, .act = EltwiseKind::relu});
  check({.n = 3, .ic = 16, .oc = 16, .h = 4, .w = 4, .depth = 4});
  // Valid and asymmetric padding along each axis; smaller than one tile.
  check({.n = 1,
         .ic = 16,
         .oc = 32,
         .h = 6,
         .w = 9,
         .pad = {0, 0, 2, 0},
         .depth = 7,
         .pad_depth = {0, 2}});
  check({.n = 2, .ic = 32, .oc = 16, .h = 3, .w = 2, .depth = 2});
}

// Channel counts that are not a multiple of the 16 lanes (nor of AVX2's 8): the last lane block
// is short, read as zeros past its channels and written only over them (in channels-last, the
// next pixel's channels follow). 2-D plain and dilated, and volumes, with a bias and a fused
// activation, batch 1 and 3, fewer channels than one block.
TEST(OneDnnWinograd, ChannelsThatEndInAShortLaneBlockAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  check({.n = 2, .ic = 20, .oc = 36, .bias = true, .act = EltwiseKind::leaky_relu});
  check({.n = 1, .ic = 12, .oc = 4, .h = 9, .w = 11, .pad = {2, 2, 3, 3}, .dilation = {2, 3}});
  check({.n = 3,
         .ic = 20,
         .oc = 12,
         .h = 5,
         .w = 6,
         .bias = true,
         .depth = 5,
         .act = EltwiseKind::relu});
  check({.n = 1, .ic = 4, .oc = 40, .h = 7, .w = 4, .depth = 6});
  check({.n = 2, .ic = 33, .oc = 17, .h = 8, .w = 9, .depth = 4}, int64_t{216} * 3 * 48);
}

// The bias gradient a spatially split convolution keeps (the unsplit program takes it after the
// max pooling): the output gradient's per-channel sum, in the blocked layout (144 channels), in
// channels-last (36: a short lane block), and on a volume shaped as a split block's window (no
// padding on the side a neighbour's halo rows fill).
TEST(OneDnnWinograd, TheBiasGradientIsTheOutputGradientsChannelSum) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  check({.bias = true, .bias_grad = true});
  check({.n = 2, .ic = 20, .oc = 36, .bias = true, .bias_grad = true});
  check({.n = 1,
         .ic = 32,
         .oc = 48,
         .h = 6,
         .w = 7,
         .bias = true,
         .bias_grad = true,
         .depth = 9,
         .pad_depth = {0, 1},
         .act = EltwiseKind::leaky_relu});
}

// Chunks of tiles over volumes: 2 x 2 x 2 x 3 = 24 tiles, 5 per chunk (4 full, one of 4), and one
// tile per chunk.
TEST(OneDnnWinograd, ChunksOfVolumeTilesAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const Case c{.n = 2, .ic = 16, .oc = 32, .h = 8, .w = 12, .depth = 5};
  check(c, int64_t{216} * 5 * 32);
  check(c, 1);
}

// The transforms compute each tile and lane block on its own, and the products' sums keep their
// order however many threads run them: the same bits on 1 and 2 threads, every pass, for volumes
// and for 5x5 filters.
void expect_the_same_bits_on_one_and_two_threads(const Case& c) {
  SCOPED_TRACE(name(c));
  const ConvDesc d = desc(c);
  auto dnn = make_backend("onednn");
  const auto x = random_floats(static_cast<size_t>(src_shape_of(d).numel()), 11);
  const auto w = random_floats(static_cast<size_t>(d.in_channels * d.out_channels * taps(c)), 12);
  const auto dy = random_floats(static_cast<size_t>(dst_shape_of(d).numel()), 13);
  auto passes = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    auto k = onednn::make_winograd_conv(std::make_shared<onednn::Context>(), d);
    Buffer scratch(k->scratch_bytes());
    FormattedBuffer xs(*dnn, k->src_format(), x), dys(*dnn, k->dst_format(), dy);
    FormattedBuffer y(*dnn, k->dst_format()), dx(*dnn, k->src_format());
    std::vector<float> dw(w.size());
    k->forward(xs.data(), w.data(), nullptr, y.data(), scratch.data());
    k->backward_data(dys.data(), w.data(), dx.data(), scratch.data());
    k->backward_weights(xs.data(), dys.data(), dw.data(), nullptr, scratch.data());
    omp_set_num_threads(saved);
    return std::vector<std::vector<float>>{y.get(), dx.get(), dw};
  };
  const auto one = passes(1), two = passes(2);
  EXPECT_EQ(one[0], two[0]) << "forward";
  EXPECT_EQ(one[1], two[1]) << "backward data";
  EXPECT_EQ(one[2], two[2]) << "backward weights";
}

TEST(OneDnnWinograd, GivesTheSameBitsOnOneAndTwoThreads) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  expect_the_same_bits_on_one_and_two_threads(
      {.n = 2, .ic = 32, .oc = 48, .h = 6, .w = 7, .depth = 5});
  expect_the_same_bits_on_one_and_two_threads(
      {.n = 2, .ic = 40, .oc = 32, .h = 9, .w = 7, .pad = {2, 2, 2, 2}, .kernel = 5});
}

TEST(OneDnnWinograd, Bf16VolumesAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  if (const std::string why = bf16_refusal(); !why.empty()) GTEST_SKIP() << why;
  check({.n = 2,
         .ic = 32,
         .oc = 16,
         .h = 5,
         .w = 6,
         .bias = true,
         .dtype = DType::bf16,
         .depth = 6,
         .act = EltwiseKind::leaky_relu});
  // Short lane blocks: 20 and 12 channels, bf16 codes read and written lane by lane.
  check(
      {.n = 1, .ic = 20, .oc = 12, .h = 6, .w = 5, .bias = true, .dtype = DType::bf16, .depth = 5});
  // The bias gradient a bf16 convolution keeps (the compile step routes only float32 ones to the
  // pooling after it): the bf16 output gradient's channel sum, blocked and channels-last.
  check({.n = 2,
         .ic = 32,
         .oc = 48,
         .h = 5,
         .w = 6,
         .bias = true,
         .bias_grad = true,
         .dtype = DType::bf16,
         .depth = 4});
  check({.n = 1,
         .ic = 20,
         .oc = 12,
         .h = 6,
         .w = 5,
         .bias = true,
         .bias_grad = true,
         .dtype = DType::bf16,
         .depth = 5});
  // The learnable CosmoFlow fixture's conv4 (batch 8, 4^3: one tile per sample).
  check({.n = 8,
         .ic = 32,
         .oc = 64,
         .h = 4,
         .w = 4,
         .bias = true,
         .bias_grad = true,
         .dtype = DType::bf16,
         .depth = 4});
}

TEST(OneDnnWinograd, TakesStride1Dilated3x3And5x5WhereItPays) {
  const ConvDesc d = desc({});
  EXPECT_TRUE(onednn::winograd_applies(d));
  auto refuses = [&](auto change) {
    ConvDesc other = d;
    change(other);
    return !onednn::winograd_serves(other) && !onednn::winograd_applies(other);
  };
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.dtype = DType::f16; }));
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.stride[1] = 2; }));
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.kernel = {7, 7, 1}; }));
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.kernel = {5, 3, 1}; }));
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.groups = 2; }));
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.transposed = true; }));
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.pad_lo[0] = 3; }));  // beyond 2 dilations
  EXPECT_TRUE(refuses([](ConvDesc& o) { o.post_op.kind = EltwiseKind::tanh; }));
  ConvDesc bias_grad = d;
  bias_grad.bias = true;
  bias_grad.bias_grad = true;
  EXPECT_TRUE(onednn::winograd_applies(bias_grad));
  // bf16 (a bias gradient or not) runs Winograd where oneDNN has no AMX kernels, which are faster.
  ConvDesc half = bias_grad;
  half.dtype = DType::bf16;
  EXPECT_TRUE(onednn::winograd_serves(half));
  EXPECT_EQ(onednn::winograd_applies(half), !onednn::amx_bf16_kernels());
  {
    const test::ScopedEnv everywhere("CREST_WINOGRAD", "1");
    EXPECT_TRUE(onednn::winograd_applies(half));
  }
  // Served, but not worth it: too few channels, or too little of the tiles used.
  ConvDesc ragged = d;  // channels in part of a lane block: served, padded with zeros
  ragged.out_channels = 136;
  EXPECT_TRUE(onednn::winograd_applies(ragged));
  ConvDesc narrow = d;
  narrow.in_channels = 64;
  EXPECT_TRUE(onednn::winograd_serves(narrow));
  EXPECT_FALSE(onednn::winograd_applies(narrow));
  const ConvDesc tiny = desc({.h = 3, .w = 2});  // 6 of 16 tile pixels
  EXPECT_DOUBLE_EQ(onednn::winograd_tile_use(tiny), 6.0 / 16);
  EXPECT_TRUE(onednn::winograd_serves(tiny));
  EXPECT_FALSE(onednn::winograd_applies(tiny));
  // aspp2 at 768x1152 (dilation 6 on 48x72: phases of 8x12, whole tiles) and at 192x288 (12x18:
  // phases of 2x3).
  const Case aspp{
      .n = 1, .ic = 2048, .oc = 256, .h = 48, .w = 72, .pad = {6, 6, 6, 6}, .dilation = {6, 6}};
  EXPECT_DOUBLE_EQ(onednn::winograd_tile_use(desc(aspp)), 1.0);
  EXPECT_TRUE(onednn::winograd_applies(desc(aspp)));
  Case small = aspp;
  small.h = 12;
  small.w = 18;
  EXPECT_DOUBLE_EQ(onednn::winograd_tile_use(desc(small)), 6.0 / 16);
  EXPECT_FALSE(onednn::winograd_applies(desc(small)));
  // Volumes: 3x3x3 undilated, from 32 channels (CosmoFlow's conv2 to conv5; conv1 reads 4).
  const ConvDesc conv2 = desc({.n = 2, .ic = 32, .oc = 64, .h = 64, .w = 64, .depth = 64});
  EXPECT_TRUE(onednn::winograd_applies(conv2));
  ConvDesc conv1 = conv2;  // served (its 4 channels padded to a lane block), but not worth it
  conv1.in_channels = 4;
  EXPECT_TRUE(onednn::winograd_serves(conv1));
  EXPECT_FALSE(onednn::winograd_applies(conv1));
  ConvDesc dilated_volume = conv2;
  dilated_volume.dilation = {1, 2, 1};
  EXPECT_FALSE(onednn::winograd_serves(dilated_volume));
  ConvDesc flat_kernel = conv2;
  flat_kernel.kernel = {1, 3, 3};
  EXPECT_FALSE(onednn::winograd_serves(flat_kernel));
  ConvDesc leaky = conv2;
  leaky.post_op = {EltwiseKind::leaky_relu, 0.3f, 0.f};
  EXPECT_TRUE(onednn::winograd_applies(leaky));
  // conv5 (256 -> 512): 16 tiles at 8^3, batch 2, but 4 at 4^3, batch 4 (the filters' transform
  // would cost more than the products save).
  EXPECT_TRUE(
      onednn::winograd_applies(desc({.n = 2, .ic = 256, .oc = 512, .h = 8, .w = 8, .depth = 8})));
  EXPECT_FALSE(
      onednn::winograd_applies(desc({.n = 4, .ic = 256, .oc = 512, .h = 4, .w = 4, .depth = 4})));
  // A split's data-gradient kernel (conv_data_gradient.hpp) runs from 4 owned rows to a 6-row
  // output-gradient window: 8 output tiles, but the data gradient tiles the 4-row input (4).
  ConvDesc gradient =
      desc({.n = 1, .ic = 256, .oc = 256, .h = 8, .w = 8, .depth = 4, .pad_depth = {2, 2}});
  ASSERT_EQ(gradient.out_size[0], 6);
  EXPECT_FALSE(onednn::winograd_applies(gradient));
  gradient.data_grad = false;  // the forward and the weight gradient alone tile the output
  EXPECT_TRUE(onednn::winograd_applies(gradient));
  ConvDesc narrow_volume = conv2;
  narrow_volume.in_channels = 16;
  EXPECT_TRUE(onednn::winograd_serves(narrow_volume));
  EXPECT_FALSE(onednn::winograd_applies(narrow_volume));
  // 5x5 (F(4x4, 5x5)): padding up to 4 dilations; the Tiramisu's dense layers from 16 channels
  // at 96x144, batch 2, but not its 6x9 bottleneck (12 tiles) nor a 1x1 map.
  const Case dense{.n = 2, .ic = 96, .oc = 32, .h = 96, .w = 144, .pad = {2, 2, 2, 2}, .kernel = 5};
  EXPECT_TRUE(onednn::winograd_applies(desc(dense)));
  Case first = dense;
  first.ic = 16;
  EXPECT_TRUE(onednn::winograd_applies(desc(first)));
  first.ic = 8;
  EXPECT_TRUE(onednn::winograd_serves(desc(first)));
  EXPECT_FALSE(onednn::winograd_applies(desc(first)));
  Case bottleneck = dense;
  bottleneck.h = 6;
  bottleneck.w = 9;
  EXPECT_TRUE(onednn::winograd_serves(desc(bottleneck)));
  EXPECT_FALSE(onednn::winograd_applies(desc(bottleneck)));
  bottleneck.n = 4;  // 24 tiles
  EXPECT_TRUE(onednn::winograd_applies(desc(bottleneck)));
  Case padded = dense;
  padded.pad = {4, 0, 4, 0};
  EXPECT_TRUE(onednn::winograd_serves(desc(padded)));
  padded.pad = {5, 0, 4, 0};
  EXPECT_FALSE(onednn::winograd_serves(desc(padded)));
  padded.dilation = {2, 2};
  padded.pad = {8, 8, 8, 8};
  EXPECT_TRUE(onednn::winograd_serves(desc(padded)));
  {
    const test::ScopedEnv off("CREST_WINOGRAD", "0");
    EXPECT_FALSE(onednn::winograd_applies(d));
    EXPECT_FALSE(onednn::winograd_applies(desc(dense)));
  }
  {
    const test::ScopedEnv everywhere("CREST_WINOGRAD", "1");  // served is enough
    EXPECT_TRUE(onednn::winograd_applies(narrow));
    EXPECT_TRUE(onednn::winograd_applies(conv1));
    EXPECT_FALSE(onednn::winograd_applies(dilated_volume));
  }
  const test::ScopedEnv wrong("CREST_WINOGRAD", "yes");
  try {
    onednn::winograd_applies(d);
    ADD_FAILURE() << "CREST_WINOGRAD=yes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CREST_WINOGRAD: 'yes'"), std::string::npos) << e.what();
  }
}

// The onednn backend's conv routes such a problem to the Winograd kernel: the same bits.
TEST(OneDnnWinograd, TheBackendsConvRunsIt) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const ConvDesc d = desc({});
  auto dnn = make_backend("onednn");
  const Shape src_shape{d.n, d.in_channels, d.in_size[0], d.in_size[1]};
  auto bk = dnn->conv(d, plain_format(src_shape, DType::f32));
  auto wk = onednn::make_winograd_conv(std::make_shared<onednn::Context>(), d);
  ASSERT_TRUE(bk->src_format() == wk->src_format());
  const auto x = random_floats(static_cast<size_t>(src_shape.numel()), 5);
  const auto w = random_floats(static_cast<size_t>(d.in_channels * d.out_channels * 9), 6);
  FormattedBuffer xs(*dnn, wk->src_format(), x);
  FormattedBuffer by(*dnn, bk->dst_format()), wy(*dnn, wk->dst_format());
  Buffer scratch(std::max(bk->scratch_bytes(), wk->scratch_bytes()));
  bk->forward(xs.data(), w.data(), nullptr, by.data(), scratch.data());
  wk->forward(xs.data(), w.data(), nullptr, wy.data(), scratch.data());
  EXPECT_EQ(by.get(), wy.get());
}

}  // namespace
}  // namespace crest
