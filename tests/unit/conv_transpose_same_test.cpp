// conv_transpose with `same: true`: TensorFlow's conv2d_transpose(padding='same'), which the
// Tiramisu's transition up uses. Its output is in * stride, and it equals PyTorch's
// ConvTranspose (padding 0) cut to that size: TensorFlow pads the adjoint conv 'same', the odd
// pixel after, so of the k - stride extra rows the transposed output loses (k - stride) / 2 at
// the start and the rest at the end (kernel 3: the last row only).
#include <gtest/gtest.h>

#include <memory>

#include "crest/core/hash_rng.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/conv.hpp"
#include "support/host_backends.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

ConvOptions up(int64_t kernel, bool same) {
  ConvOptions o;
  o.out_channels = 3;
  o.kernel = {kernel, kernel};
  o.stride = {2, 2};
  o.same = same;
  return o;
}

Graph one_layer(const ConvOptions& o, int64_t h, int64_t w) {
  Graph g;
  const ValueId x = g.input("x", Shape{2, h, w});
  g.mark_output(g.add("up", layers::conv_transpose(o), {x}));
  return g;
}

struct Compiled {  // held by pointer: the executor keeps references to its graph and backend
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executor> ex;
  TensorView out() const { return ex->output(graph->outputs().at(0)); }
};

Compiled compiled(const ConvOptions& o, int64_t h, int64_t w, const std::string& backend,
                  int64_t batch) {
  Compiled c{std::make_unique<Graph>(one_layer(o, h, w)), make_backend(backend), nullptr};
  CompileOptions co;
  co.batch = batch;
  co.dtype = DType::f32;  // every host backend's
  c.ex = std::make_unique<Executor>(*c.graph, *c.backend, co);
  return c;
}

Shape output_shape(int64_t kernel, int64_t h, int64_t w) {
  return compiled(up(kernel, true), h, w, "reference", 1).out().shape();
}

TEST(ConvTransposeSame, OutputIsTheInputTimesTheStride) {
  for (int64_t k : {1, 2, 3, 4, 5}) {
    EXPECT_EQ(output_shape(k, 5, 6), Shape({1, 3, 10, 12})) << "kernel " << k;
    EXPECT_EQ(output_shape(k, 1, 1), Shape({1, 3, 2, 2})) << "kernel " << k;
  }
}

TEST(ConvTransposeSame, RefusesExplicitPaddingBesideSame) {
  ConvOptions o = up(3, true);
  o.output_padding = {1, 1};
  EXPECT_THROW(compiled(o, 4, 4, "reference", 1), Error);
  o = up(3, true);
  o.padding = {1, 1};
  EXPECT_THROW(compiled(o, 4, 4, "reference", 1), Error);
}

// On every host backend: the same weights and input through both layers.
TEST(ConvTransposeSame, EqualsTheUnpaddedTransposedConvCutAtTheEnd) {
  constexpr int64_t kH = 4, kW = 5, kBatch = 2;
  for (const std::string& name : test::host_backend_names()) {
    for (int64_t kernel : {3, 5}) {
      Compiled same = compiled(up(kernel, true), kH, kW, name, kBatch);
      Compiled full = compiled(up(kernel, false), kH, kW, name, kBatch);
      for (Executor* ex : {same.ex.get(), full.ex.get()}) {
        ParamStore& p = ex->params();
        for (size_t s = 0; s < p.slots().size(); ++s) {
          float* v = static_cast<float*>(p.value(s).data());
          for (size_t i = 0; i < p.slots()[s].count; ++i)
            v[i] = static_cast<float>(rng::unit_double(rng::counter_bits(7 + s, i)) - 0.5);
        }
        const TensorView x = ex->input("x");
        for (int64_t i = 0; i < x.numel(); ++i)
          x.as<float>()[i] =
              static_cast<float>(rng::unit_double(rng::counter_bits(99, static_cast<uint64_t>(i))));
        ex->forward(false);
      }
      const TensorView a = same.out(), b = full.out();
      const int64_t big_h = (kH - 1) * 2 + kernel, big_w = (kW - 1) * 2 + kernel;
      const int64_t first = (kernel - 2) / 2;  // rows TensorFlow cuts at the start
      ASSERT_EQ(a.shape(), Shape({kBatch, 3, 2 * kH, 2 * kW}));
      ASSERT_EQ(b.shape(), Shape({kBatch, 3, big_h, big_w}));
      for (int64_t nc = 0; nc < kBatch * 3; ++nc)
        for (int64_t h = 0; h < 2 * kH; ++h)
          for (int64_t w = 0; w < 2 * kW; ++w)
            ASSERT_NEAR(a.as<float>()[(nc * 2 * kH + h) * 2 * kW + w],
                        b.as<float>()[(nc * big_h + h + first) * big_w + w + first], 1e-5)
                << name << " kernel " << kernel << " at " << nc << "," << h << "," << w;
    }
  }
}

}  // namespace
}  // namespace crest
