// The CUDA backend against the reference backend, kernel by kernel, on a GPU: convolutions
// (2-D and 3-D, strided, dilated, grouped, depthwise, transposed, 1x1, unequal padding), pooling,
// dense, activations, concatenation, layout reorders and the vector ops, each pass compared in
// float32 (the reference's float32 loops; cuDNN and cuBLAS run without TF32), in plain layout and,
// where a kernel computes channels-last, in that layout too (its values reordered on the device:
// test::InKernelFormat). Inputs go in and results come out through the backend's memory resource,
// as everything outside a backend must.
// Skipped where no device is usable: scripts/device-check.sh runs these on the GPU machine
// (docs/cuda.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/core/tensor.hpp"
#include "support/cli_util.hpp"
#include "support/kernel_format.hpp"
#include "support/mirrored_values.hpp"
#include "support/scoped_env.hpp"

namespace crest {
namespace {

using test::InKernelFormat;
using test::kTolerance;
using test::MirroredValues;

size_t numel(const MemFormat& f) { return static_cast<size_t>(f.shape.numel()); }

struct ConvCase {
  std::string name;
  ConvDesc d;
};

ConvDesc conv2d(int64_t in_c, int64_t out_c, int64_t size, int64_t k, int64_t stride, int64_t pad,
                int64_t dilation = 1, int64_t groups = 1) {
  ConvDesc d;
  d.spatial_rank = 2;
  d.n = 2;
  d.in_channels = in_c;
  d.out_channels = out_c;
  d.groups = groups;
  d.in_size = {size, size + 1, 1};
  for (int a = 0; a < 2; ++a) {
    d.kernel[a] = k;
    d.stride[a] = stride;
    d.dilation[a] = dilation;
    d.pad_lo[a] = d.pad_hi[a] = pad;
    d.out_size[a] = (d.in_size[a] + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  }
  return d;
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> c{{"3x3", conv2d(3, 5, 7, 3, 1, 1)},
                          {"3x3_stride2", conv2d(4, 6, 9, 3, 2, 1)},
                          {"3x3_dilation2", conv2d(3, 4, 9, 3, 1, 2, 2)},
                          {"grouped", conv2d(4, 6, 6, 3, 1, 1, 1, 2)},
                          {"depthwise", conv2d(5, 5, 6, 3, 1, 1, 1, 5)},
                          {"1x1_no_bias", conv2d(7, 3, 5, 1, 1, 0)}};
  c.back().d.bias = false;
  ConvDesc t = conv2d(4, 3, 5, 4, 2, 1);  // transposed: 5 -> 10 with kernel 4, stride 2, pad 1
  t.transposed = true;
  for (int a = 0; a < 2; ++a) t.out_size[a] = (t.in_size[a] - 1) * 2 - 2 + 4;
  c.push_back({"transposed_stride2", t});
  // Unequal padding, which cuDNN cannot express: DeepCAM's upsampling (kernel 3, stride 2,
  // padding 1, output padding 1: 5 -> 10) and `same` padding of an even kernel.
  ConvDesc up = conv2d(4, 3, 5, 3, 2, 1);
  up.transposed = true;
  for (int a = 0; a < 2; ++a) {
    up.pad_hi[a] = 0;
    up.out_size[a] = 2 * up.in_size[a];
  }
  c.push_back({"transposed_output_padding", up});
  ConvDesc even = conv2d(3, 4, 6, 2, 1, 0);
  for (int a = 0; a < 2; ++a) {
    even.pad_hi[a] = 1;
    even.out_size[a] = even.in_size[a];
  }
  c.push_back({"even_kernel_same_padding", even});
  ConvDesc v = conv2d(3, 5, 5, 3, 1, 1);  // 3-D, odd extents
  v.spatial_rank = 3;
  v.in_size = {5, 6, 7};
  v.out_size = v.in_size;
  v.kernel[2] = 3;
  v.pad_lo[2] = v.pad_hi[2] = 1;
  c.push_back({"3d_3x3x3", v});
  return c;
}

MemFormat conv_src(const ConvDesc& d, Layout layout = Layout::plain) {
  std::vector<int64_t> dims{d.n, d.in_channels};
  for (int a = 0; a < d.spatial_rank; ++a) dims.push_back(d.in_size[static_cast<size_t>(a)]);
  return plain_format(Shape(dims), DType::f32, layout);
}

size_t weight_count(const ConvDesc& d) {
  size_t n = static_cast<size_t>(d.in_channels * d.out_channels / d.groups);
  for (int a = 0; a < d.spatial_rank; ++a)
    n *= static_cast<size_t>(d.kernel[static_cast<size_t>(a)]);
  return n;
}

// One convolution on both backends, every pass, the cuda kernel made with a producer of layout
// `hint`; the cuda kernel's algorithms and layout in the messages. Returns the cuda kernel's.
std::string expect_conv_agreement(Backend& cuda, Backend& ref, const ConvDesc& d,
                                  Layout hint = Layout::plain) {
  auto rk = ref.conv(d, conv_src(d));
  auto ck = cuda.conv(d, conv_src(d, hint));
  EXPECT_EQ(ck->dst_format().shape, rk->dst_format().shape);
  if (ck->dst_format().shape != rk->dst_format().shape) return ck->implementation();
  std::string how = ck->implementation();
  const size_t src_n = numel(rk->src_format()), dst_n = numel(rk->dst_format());
  const size_t w_n = weight_count(d), b_n = static_cast<size_t>(d.out_channels);
  MirroredValues src(cuda, src_n, 1), w(cuda, w_n, 2), b(cuda, b_n, 3), dst(cuda, dst_n, 0);
  MirroredValues diff_dst(cuda, dst_n, 4), diff_src(cuda, src_n, 0), dw(cuda, w_n, 0),
      db(cuda, b_n, 0);
  std::vector<char> rs(rk->scratch_bytes());
  Buffer cs(ck->scratch_bytes(), 256, cuda.memory());
  InKernelFormat x(cuda, ck->src_format()), y(cuda, ck->dst_format()), dy(cuda, ck->dst_format()),
      dx(cuda, ck->src_format());
  rk->forward(src.ref(), w.ref(), b.ref(), dst.ref(), rs.data());
  ck->forward(x.in(src), w.dev(), b.dev(), y.out(dst), cs.data());
  y.back(dst);
  EXPECT_LT(dst.error(), kTolerance) << "forward, " << how;
  rk->backward_data(diff_dst.ref(), w.ref(), diff_src.ref(), rs.data());
  ck->backward_data(dy.in(diff_dst), w.dev(), dx.out(diff_src), cs.data());
  dx.back(diff_src);
  EXPECT_LT(diff_src.error(), kTolerance) << "backward data, " << how;
  const bool bias = d.bias;
  rk->backward_weights(src.ref(), diff_dst.ref(), dw.ref(), bias ? db.ref() : nullptr, rs.data());
  ck->backward_weights(x.in(src), dy.in(diff_dst), dw.dev(), bias ? db.dev() : nullptr, cs.data());
  EXPECT_LT(dw.error(), kTolerance) << "weight gradient, " << how;
  if (bias) {
    EXPECT_LT(db.error(), kTolerance) << "bias gradient, " << how;
  }
  return how;
}

// Whether a convolution's padding differs between the sides of an axis.
bool pads_unequally(const ConvDesc& d) {
  for (size_t a = 0; a < static_cast<size_t>(d.spatial_rank); ++a)
    if (d.pad_lo[a] != d.pad_hi[a]) return true;
  return false;
}

TEST(CudaAgreement, ConvolutionsAgreeWithTheReferenceInEveryPass) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    expect_conv_agreement(*cuda, *ref, c.d);
  }
}

// CREST_CUDA_LAYOUT=channels_last: a convolution fed channels-last values computes channels-last
// (cuDNN's NHWC tensors and filters, the weights transposed in scratch, a 2-D extension for
// unequal padding) and agrees with the reference in every pass; a 3-D one with unequal padding,
// or one cuDNN cannot run channels-last in float32, computes plain and
// says why (each case's line is printed: `[ LAYOUT ]`). By default (`follow`) a float32 convolution
// computes plain and a bf16 one channels-last where fed channels-last; `plain` keeps both plain;
// another value is refused naming the variable.
TEST(CudaAgreement, ChannelsLastConvolutionsAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto ref = make_backend("reference");
  {
    const test::ScopedEnv forced("CREST_CUDA_LAYOUT", "channels_last");
    auto cuda = make_backend("cuda");
    for (const ConvCase& c : conv_cases()) {
      SCOPED_TRACE(c.name);
      const std::string how = expect_conv_agreement(*cuda, *ref, c.d, Layout::channels_last);
      if (pads_unequally(c.d) && c.d.spatial_rank == 3) {
        EXPECT_NE(how.find(" plain (channels-last: unequal padding of a 3-D convolution)"),
                  std::string::npos)
            << how;
      } else {  // cuDNN may not run a float32 problem channels-last
        EXPECT_TRUE(how.find(" channels-last") != std::string::npos ||
                    how.find(" plain (channels-last: cuDNN") != std::string::npos)
            << how;
      }
      std::cout << "[ LAYOUT ] " << c.name << ": " << how << "\n";
    }
    ConvDesc v = conv_cases().back().d;  // 3-D, `same` padding of an even kernel
    ASSERT_EQ(v.spatial_rank, 3);
    for (size_t a = 0; a < 3; ++a) {
      v.kernel[a] = 2;
      v.pad_lo[a] = 0;
      v.pad_hi[a] = 1;
    }
    SCOPED_TRACE("3d_even_kernel_same_padding");
    const std::string how = expect_conv_agreement(*cuda, *ref, v, Layout::channels_last);
    EXPECT_NE(how.find(" plain (channels-last: unequal padding"), std::string::npos) << how;
  }
  ConvDesc half = conv_cases().front().d;
  half.dtype = DType::bf16;
  const auto layout_made = [&](Backend& cuda, const ConvDesc& d) {
    MemFormat hint = conv_src(d, Layout::channels_last);
    hint.dtype = d.dtype;
    return cuda.conv(d, hint)->src_format().layout;
  };
  {
    auto cuda = make_backend("cuda");
    EXPECT_EQ(layout_made(*cuda, conv_cases().front().d), Layout::plain) << "float32, follow";
    EXPECT_EQ(layout_made(*cuda, half), Layout::channels_last) << "bf16, follow";
  }
  {
    const test::ScopedEnv plain("CREST_CUDA_LAYOUT", "plain");
    auto cuda = make_backend("cuda");
    EXPECT_EQ(layout_made(*cuda, half), Layout::plain) << "bf16, plain";
  }
  const test::ScopedEnv wrong("CREST_CUDA_LAYOUT", "nhwc");
  try {
    make_backend("cuda");
    ADD_FAILURE() << "CREST_CUDA_LAYOUT=nhwc was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CREST_CUDA_LAYOUT"), std::string::npos) << e.what();
  }
}

// crest's own weight gradient (im2col and cuBLAS), which the measured choice takes where it is
// faster than cuDNN's: forced here wherever it applies (one group), in every case above and in
// CosmoFlow's first layer shape (4 channels, 3x3x3), with several column chunks per sample.
TEST(CudaAgreement, Im2colWeightGradientsAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  const test::ScopedEnv forced("CREST_CUDNN_ALGORITHMS", "im2col");
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  std::vector<ConvCase> cases = conv_cases();
  ConvDesc first = conv2d(4, 8, 9, 3, 1, 1);
  first.spatial_rank = 3;
  first.in_size = first.out_size = {9, 10, 11};
  first.kernel[2] = 3;
  first.pad_lo[2] = first.pad_hi[2] = 1;
  cases.push_back({"cosmoflow_conv1_shape", first});
  for (const ConvCase& c : cases) {
    if (c.d.groups != 1) continue;
    SCOPED_TRACE(c.name);
    expect_conv_agreement(*cuda, *ref, c.d);
  }
}

PoolDesc pool_desc(PoolKind kind, int rank, int64_t k, int64_t stride, int64_t pad) {
  PoolDesc d;
  d.spatial_rank = rank;
  d.kind = kind;
  d.n = 2;
  d.channels = 3;
  for (int a = 0; a < rank; ++a) {
    d.in_size[a] = 6 + a;
    d.kernel[a] = k;
    d.stride[a] = stride;
    d.pad_lo[a] = d.pad_hi[a] = pad;
    d.out_size[a] = (d.in_size[a] + 2 * pad - k) / stride + 1;
  }
  return d;
}

// No padding after: a spatial split's local padding of a rank whose neighbour sends the rows.
PoolDesc unequal_padding(PoolDesc d) {
  for (size_t a = 0; a < static_cast<size_t>(d.spatial_rank); ++a) {
    d.pad_hi[a] = 0;
    d.out_size[a] = (d.in_size[a] + d.pad_lo[a] - d.kernel[a]) / d.stride[a] + 1;
  }
  return d;
}

// Even extents: every input element in exactly one window (CosmoFlow's pools).
PoolDesc exact_tiling(PoolDesc d) {
  for (size_t a = 0; a < static_cast<size_t>(d.spatial_rank); ++a) {
    d.in_size[a] = 2 * d.kernel[a] + 2 * static_cast<int64_t>(a) * d.kernel[a];
    d.out_size[a] = d.in_size[a] / d.stride[a];
  }
  return d;
}

// Every pooling case on both backends, both passes, the cuda kernel made with a producer of
// layout `hint`.
void expect_pooling_agrees(Backend& cuda, Backend& ref, Layout hint) {
  const std::vector<std::pair<std::string, PoolDesc>> cases{
      {"max_2x2", pool_desc(PoolKind::max, 2, 2, 2, 0)},
      {"max_3d", pool_desc(PoolKind::max, 3, 2, 2, 0)},
      {"max_3d_tiling_exactly", exact_tiling(pool_desc(PoolKind::max, 3, 2, 2, 0))},
      {"avg_include_pad", pool_desc(PoolKind::avg_include_pad, 2, 3, 1, 1)},
      {"avg_exclude_pad", pool_desc(PoolKind::avg_exclude_pad, 2, 3, 2, 1)},
      {"max_unequal_padding", unequal_padding(pool_desc(PoolKind::max, 2, 3, 2, 1))},
      {"avg_include_pad_unequal_padding",
       unequal_padding(pool_desc(PoolKind::avg_include_pad, 3, 3, 1, 1))}};
  for (const auto& [name, d] : cases) {
    SCOPED_TRACE(name);
    auto rk = ref.pool(d, plain_format(Shape{1}, DType::f32));
    auto ck = cuda.pool(d, plain_format(Shape{1}, DType::f32, hint));
    const bool unequal = d.pad_lo[0] != d.pad_hi[0];
    const bool channels_last =
        hint == Layout::channels_last && (d.kind == PoolKind::max || !unequal);
    EXPECT_EQ(ck->src_format().layout, channels_last ? Layout::channels_last : Layout::plain);
    const size_t src_n = numel(rk->src_format()), dst_n = numel(rk->dst_format());
    MirroredValues src(cuda, src_n, 5), dst(cuda, dst_n, 0), diff_dst(cuda, dst_n, 6),
        diff_src(cuda, src_n, 0);
    std::vector<char> rw(rk->workspace_bytes()), rs(rk->scratch_bytes());
    Buffer cw(ck->workspace_bytes(), 256, cuda.memory()),
        cs(ck->scratch_bytes(), 256, cuda.memory());
    InKernelFormat x(cuda, ck->src_format()), y(cuda, ck->dst_format()), dy(cuda, ck->dst_format()),
        dx(cuda, ck->src_format());
    rk->forward(src.ref(), dst.ref(), rw.data(), rs.data());
    ck->forward(x.in(src), y.out(dst), cw.data(), cs.data());
    y.back(dst);
    EXPECT_LT(dst.error(), kTolerance) << "forward";
    rk->backward(diff_dst.ref(), rw.data(), diff_src.ref(), rs.data());
    ck->backward(dy.in(diff_dst), cw.data(), dx.out(diff_src), cs.data());
    dx.back(diff_src);
    EXPECT_LT(diff_src.error(), kTolerance) << "backward";
  }
}

// Each pooling made with a producer of each layout (CREST_CUDA_LAYOUT=channels_last for the
// second): max pooling computes in either, an average channels-last unless its padding is
// unequal.
TEST(CudaAgreement, PoolingAgreesWithTheReferenceBothWays) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto ref = make_backend("reference");
  {
    auto cuda = make_backend("cuda");
    expect_pooling_agrees(*cuda, *ref, Layout::plain);
  }
  const test::ScopedEnv forced("CREST_CUDA_LAYOUT", "channels_last");
  auto cuda = make_backend("cuda");
  SCOPED_TRACE("channels-last");
  expect_pooling_agrees(*cuda, *ref, Layout::channels_last);
}

// A run's measured cuDNN algorithms go into its record (Backend::set_layout_tuning), and a
// resumed run takes the record's instead of measuring: here a record edited to other deterministic
// algorithms (implicit GEMM forward, ALGO_1 data and filter gradients), which the new kernel names
// and computes with, agreeing with the reference; a record that does not fit is refused, naming
// the file.
TEST(CudaAgreement, MeasuredAlgorithmsAreRecordedAndAResumeTakesTheRecord) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  const test::TempDir dir;
  const ConvDesc d = conv2d(3, 5, 9, 3, 1, 1);
  LayoutTuning fresh;
  fresh.record_file = dir.file("layouts.rank0.json");
  fresh.cache_file = dir.file("cache.json");
  {
    auto cuda = make_backend("cuda");
    cuda->set_layout_tuning(fresh);
    EXPECT_NE(cuda->conv(d, conv_src(d))->implementation().find("(measured)"), std::string::npos);
  }
  nlohmann::json record = nlohmann::json::parse(std::ifstream(fresh.record_file));
  ASSERT_EQ(record["choices"].size(), 1U) << record.dump();
  const std::string problem = record["choices"].begin().key();
  EXPECT_EQ(problem.rfind("cudnn ", 0), 0U) << problem;
  const auto rewrite = [&](const std::string& choice) {
    record["choices"][problem] = choice;
    std::ofstream(fresh.record_file) << record.dump();
  };
  LayoutTuning resumed = fresh;
  resumed.reuse_record = resumed.measure = true;
  rewrite("fwd 0 bwd-data 1 bwd-filter 1");
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  cuda->set_layout_tuning(resumed);
  EXPECT_EQ(cuda->conv(d, conv_src(d))->implementation(),
            "cudnn fwd 0 / bwd-data 1 / bwd-filter 1 (measured)");
  expect_conv_agreement(*cuda, *ref, d);
  rewrite("fwd 99");
  cuda->set_layout_tuning(resumed);
  try {
    cuda->conv(d, conv_src(d));
    ADD_FAILURE() << "a record that does not fit was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fresh.record_file), std::string::npos) << e.what();
  }
}

// cuBLASLt's products: odd sizes, with the bias in the forward's epilogue and without a bias,
// and a layer large enough for a tiled algorithm.
TEST(CudaAgreement, DenseAgreesWithTheReferenceInEveryPass) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const DenseDesc& d :
       {DenseDesc{3, 7, 5, true, DType::f32}, DenseDesc{3, 7, 5, false, DType::f32},
        DenseDesc{8, 300, 96, true, DType::f32}}) {
    SCOPED_TRACE(std::to_string(d.n) + "x" + std::to_string(d.in_features) + "->" +
                 std::to_string(d.out_features) + (d.bias ? " with a bias" : " without"));
    auto rk = ref->dense(d);
    auto ck = cuda->dense(d);
    const auto n = static_cast<size_t>(d.n), in = static_cast<size_t>(d.in_features),
               out = static_cast<size_t>(d.out_features);
    MirroredValues src(*cuda, n * in, 1), w(*cuda, out * in, 2), b(*cuda, out, 3),
        dst(*cuda, n * out, 0);
    MirroredValues diff_dst(*cuda, n * out, 4), diff_src(*cuda, n * in, 0), dw(*cuda, out * in, 0),
        db(*cuda, out, 0);
    const void* ref_bias = d.bias ? b.ref() : nullptr;
    const void* dev_bias = d.bias ? b.dev() : nullptr;
    std::vector<char> rs(rk->scratch_bytes());
    Buffer cs(ck->scratch_bytes(), 256, cuda->memory());
    rk->forward(src.ref(), w.ref(), ref_bias, dst.ref(), rs.data());
    ck->forward(src.dev(), w.dev(), dev_bias, dst.dev(), cs.data());
    EXPECT_LT(dst.error(), kTolerance) << "forward";
    rk->backward_data(diff_dst.ref(), w.ref(), diff_src.ref(), rs.data());
    ck->backward_data(diff_dst.dev(), w.dev(), diff_src.dev(), cs.data());
    EXPECT_LT(diff_src.error(), kTolerance) << "backward data";
    rk->backward_weights(src.ref(), diff_dst.ref(), dw.ref(), d.bias ? db.ref() : nullptr,
                         rs.data());
    ck->backward_weights(src.dev(), diff_dst.dev(), dw.dev(), d.bias ? db.dev() : nullptr,
                         cs.data());
    EXPECT_LT(dw.error(), kTolerance) << "weight gradient";
    if (d.bias) {
      EXPECT_LT(db.error(), kTolerance) << "bias gradient";
    }
  }
}

// Three inputs of one layout concatenated along the channels and the gradient split back, against
// the reference's plain concatenation: bytes moved only, so exactly.
void expect_concatenation_agrees(Backend& cuda, Backend& ref, Layout layout) {
  SCOPED_TRACE(layout_name(layout));
  const std::vector<Shape> shapes{Shape{2, 1, 4, 3}, Shape{2, 3, 4, 3}, Shape{2, 2, 4, 3}};
  std::vector<MemFormat> plain, srcs;
  for (const Shape& shape : shapes) {
    plain.push_back(plain_format(shape, DType::f32));
    srcs.push_back(plain_format(shape, DType::f32, layout));
  }
  auto rc = ref.concat(plain);
  auto cc = cuda.concat(srcs);
  ASSERT_EQ(cc->dst_format().shape, rc->dst_format().shape);
  EXPECT_EQ(cc->dst_format().layout, layout);
  MirroredValues a(cuda, 24, 1), b(cuda, 72, 2), c(cuda, 48, 3), out(cuda, 144, 0),
      dout(cuda, 144, 4);
  MirroredValues da(cuda, 24, 0), dc(cuda, 48, 0);
  InKernelFormat xa(cuda, srcs[0]), xb(cuda, srcs[1]), xc(cuda, srcs[2]), y(cuda, cc->dst_format()),
      dy(cuda, cc->dst_format()), dxa(cuda, srcs[0]), dxc(cuda, srcs[2]);
  rc->forward({a.ref(), b.ref(), c.ref()}, out.ref());
  cc->forward({xa.in(a), xb.in(b), xc.in(c)}, y.out(out));
  y.back(out);
  EXPECT_EQ(out.error(), 0) << "concatenation moves bytes only";
  rc->backward(dout.ref(), {da.ref(), nullptr, dc.ref()});
  cc->backward(dy.in(dout), {dxa.out(da), nullptr, dxc.out(dc)});
  dxa.back(da);
  dxc.back(dc);
  EXPECT_EQ(da.error(), 0);
  EXPECT_EQ(dc.error(), 0);
}

TEST(CudaAgreement, ActivationsAndConcatenationAgreeWithTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  const MemFormat f = plain_format(Shape{2, 3, 5}, DType::f32);
  for (const EltwiseDesc& e :
       {EltwiseDesc{EltwiseKind::relu}, EltwiseDesc{EltwiseKind::leaky_relu, 0.2f},
        EltwiseDesc{EltwiseKind::tanh}, EltwiseDesc{EltwiseKind::sigmoid},
        EltwiseDesc{EltwiseKind::linear, 0.5f, -0.25f}}) {
    SCOPED_TRACE(static_cast<int>(e.kind));
    auto rk = ref->eltwise(e, f);
    auto ck = cuda->eltwise(e, f);
    MirroredValues x(*cuda, 30, 7), y(*cuda, 30, 0), dy(*cuda, 30, 8), dx(*cuda, 30, 0);
    rk->forward(x.ref(), y.ref());
    ck->forward(x.dev(), y.dev());
    EXPECT_LT(y.error(), kTolerance);
    rk->backward(y.ref(), dy.ref(), dx.ref());
    ck->backward(y.dev(), dy.dev(), dx.dev());
    EXPECT_LT(dx.error(), kTolerance);
  }
  for (const Layout layout : {Layout::plain, Layout::channels_last})
    expect_concatenation_agrees(*cuda, *ref, layout);
  // Layouts mixed: refused (the concat layer then asks for one layout).
  EXPECT_FALSE(cuda->supports({plain_format(Shape{2, 1, 4}, DType::f32),
                               plain_format(Shape{2, 3, 4}, DType::f32, Layout::channels_last)}));
}

// The data files' channels-last order to plain and back, in shapes that leave partial tiles of
// the transpose (channels and spatial extents not multiples of 32) and with 1 to 3 spatial axes.
TEST(CudaAgreement, LayoutReordersMoveBytesAsTheReference) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  auto ref = make_backend("reference");
  for (const Shape& shape : {Shape{2, 37, 45}, Shape{3, 16, 5, 9}, Shape{2, 4, 33, 3, 2}}) {
    for (const Layout from : {Layout::plain, Layout::channels_last}) {
      const Layout to = from == Layout::plain ? Layout::channels_last : Layout::plain;
      SCOPED_TRACE(plain_format(shape, DType::f32, from).str());
      const MemFormat f = plain_format(shape, DType::f32, from);
      const MemFormat t = plain_format(shape, DType::f32, to);
      auto rk = ref->reorder(f, t);
      auto ck = cuda->reorder(f, t);
      MirroredValues src(*cuda, numel(f), 5), dst(*cuda, numel(f), 0);
      rk->execute(src.ref(), dst.ref());
      ck->execute(src.dev(), dst.dev());
      EXPECT_EQ(dst.error(), 0) << "a reorder moves values only";
    }
  }
}

}  // namespace
}  // namespace crest
