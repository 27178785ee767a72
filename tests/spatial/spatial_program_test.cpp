// A whole compiled program split spatially (CompileOptions::spatial, the split_spatially pass),
// under mpirun: a small CosmoFlow-shaped 3-D network — convolutions with fused activations, max
// and average pooling, a residual add of two split values, flatten, dropout, dense, MSE — run
// unsplit on every rank and split over the group, for every decomposition of the world's size.
// The loss, the prediction, the gradient of the input block, and every parameter gradient
// averaged over the group (as data-parallel averaging does) equal the unsplit program's: within
// 1e-10 in float64 on the reference backend, 1e-5 relative in float32 on oneDNN.
#include "crest/spatial/spatial_program.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "spatial/box_copy.hpp"
#include "world.hpp"

namespace crest {
namespace {

using spatial_detail::box_transfer;
using spatial_detail::BoxAt;
using spatial_detail::BoxOp;
using test::has_backend;
using test::random_values;

constexpr int64_t kBatch = 2, kChannels = 2;
const std::vector<int64_t> kVolume{16, 12, 10};

// x [2, 16, 12, 10] channels-last -> conv 3^3 (4) + leaky -> max-pool 2 -> {conv 3^3 + tanh} +
// conv 1^3 -> avg-pool 2 -> flatten -> dropout -> dense (3) -> MSE against y [3].
Graph small_network() {
  Graph g;
  const ValueId x =
      g.input("x", Shape{kChannels, kVolume[0], kVolume[1], kVolume[2]}, Layout::channels_last);
  const ValueId y = g.input("y", Shape{3});
  ConvOptions c;
  c.out_channels = 4;
  c.kernel = {3, 3, 3};
  c.same = true;
  ValueId t = g.add("conv1", layers::conv(c), {x});
  t = g.add("act1", layers::leaky_relu(0.3f), {t});
  const ValueId pooled = g.add("pool1", layers::pool(PoolOptions{}), {t});
  ValueId a = g.add("conv2", layers::conv(c), {pooled});
  a = g.add("act2", layers::tanh(), {a});
  ConvOptions one = c;
  one.kernel = {1, 1, 1};
  one.same = false;
  const ValueId b = g.add("conv3", layers::conv(one), {pooled});
  t = g.add("add", layers::add(), {a, b});
  PoolOptions avg;
  avg.kind = PoolKind::avg_include_pad;
  t = g.add("pool2", layers::pool(avg), {t});
  t = g.add("flatten", layers::flatten(), {t});
  t = g.add("dropout", layers::dropout(0.3f), {t});
  DenseOptions d;
  d.out_features = 3;
  const ValueId out = g.add("fc", layers::dense(d), {t});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::mse_loss(), {out, y}));
  return g;
}

void write(const TensorView& t, const std::vector<double>& v) {
  ASSERT_EQ(static_cast<size_t>(t.desc().shape.numel()), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.desc().dtype == DType::f64)
      t.as<double>()[i] = v[i];
    else
      t.as<float>()[i] = static_cast<float>(v[i]);
  }
}

std::vector<double> read(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.desc().shape.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.desc().dtype == DType::f64 ? t.as<double>()[i] : t.as<float>()[i];
  return v;
}

// This rank's block of a channels-last [n, d, h, w, c] array of doubles.
std::vector<double> block_of(const std::vector<double>& whole, const Shape& local_logical,
                             const std::vector<int64_t>& offset) {
  const std::vector<int64_t> dims{kBatch, kVolume[0], kVolume[1], kVolume[2], kChannels};
  const std::vector<int64_t> count{kBatch, local_logical[2], local_logical[3], local_logical[4],
                                   kChannels};
  std::vector<double> out(static_cast<size_t>(numel_of(count)));
  box_transfer(whole.data(), BoxAt{dims, {0, offset[0], offset[1], offset[2], 0}}, out.data(),
               BoxAt{count, {0, 0, 0, 0, 0}}, count, DType::f64, BoxOp::copy);
  return out;
}

// Where this rank's block of the volume starts (numpy.array_split blocks over the grid).
std::vector<int64_t> block_offset(const SpatialGrid& grid, int rank) {
  const std::vector<int> c = grid.coords(rank);
  std::vector<int64_t> o;
  for (size_t a = 0; a < 3; ++a) o.push_back(block_range(kVolume[a], grid.parts[a], c[a]).begin);
  return o;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0, worst = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, tol * (1 + scale)) << what << " (rank " << test::world().rank() << ")";
}

struct StepResult {
  double loss = 0;
  std::vector<double> prediction, input_grad;
  std::vector<std::vector<double>> grads;  // per trainable slot
};

StepResult run_step(const Graph& g, Backend& backend, CompileOptions o,
                    const std::vector<double>& x) {
  o.batch = kBatch;
  o.seed = 7;
  o.input_grads = true;
  Executor ex(g, backend, o);
  write(ex.input("x"), x);
  write(ex.input("y"), random_values(kBatch * 3, 2));
  StepResult r;
  r.loss = ex.forward();
  ex.backward();
  r.prediction = read(ex.output(g.outputs()[0]));
  r.input_grad = read(ex.input_grad("x"));
  for (size_t s = 0; s < ex.params().slots().size(); ++s)
    if (ex.params().slots()[s].spec.trainable) r.grads.push_back(read(ex.params().grad(s)));
  return r;
}

// Every decomposition of the world's size over the three axes (one axis, or 2 x size/2).
std::vector<std::vector<int>> decompositions(int ranks) {
  std::vector<std::vector<int>> out;
  for (size_t a = 0; a < 3; ++a) {
    std::vector<int> p(3, 1);
    p[a] = ranks;
    out.push_back(p);
    for (size_t b = a + 1; b < 3 && ranks == 4; ++b) {
      std::vector<int> q(3, 1);
      q[a] = 2;
      q[b] = 2;
      out.push_back(q);
    }
  }
  return out;
}

void check_program(const std::string& backend_name, DType dtype, double tol) {
  Communicator& world = test::world();
  auto backend = make_backend(backend_name);
  const Graph g = small_network();
  const auto x =
      random_values(size_t(kBatch * kChannels * kVolume[0] * kVolume[1] * kVolume[2]), 1);
  CompileOptions base;
  base.dtype = dtype;
  const StepResult whole = run_step(g, *backend, base, x);
  for (const auto& parts : decompositions(world.size())) {
    SCOPED_TRACE("dist.spatial " + std::to_string(parts[0]) + "," + std::to_string(parts[1]) + "," +
                 std::to_string(parts[2]));
    const SpatialGrid grid{parts};
    CompileOptions split = base;
    split.spatial = make_spatial_split(world, grid);
    const Shape local =
        split.spatial->local_shape(Shape{kBatch, kChannels, kVolume[0], kVolume[1], kVolume[2]});
    const auto offset = block_offset(grid, world.rank());
    const StepResult mine = run_step(g, *backend, split, block_of(x, local, offset));
    EXPECT_NEAR(mine.loss, whole.loss, tol * (1 + std::fabs(whole.loss)));
    expect_close(mine.prediction, whole.prediction, tol, "prediction");
    expect_close(mine.input_grad, block_of(whole.input_grad, local, offset), tol, "input gradient");
    ASSERT_EQ(mine.grads.size(), whole.grads.size());
    for (size_t s = 0; s < mine.grads.size(); ++s) {
      std::vector<double> mean = mine.grads[s];
      world.allreduce_sum(mean.data(), mean.size());
      for (double& v : mean) v /= world.size();
      expect_close(mean, whole.grads[s], tol, "gradient of trainable slot " + std::to_string(s));
    }
  }
}

TEST(SpatialProgram, SmallNetworkFloat64OnTheReferenceBackend) {
  check_program("reference", DType::f64, 1e-10);
}

TEST(SpatialProgram, SmallNetworkFloat32OnOneDnn) {
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  check_program("onednn", DType::f32, 1e-5);
}

// A decomposition the samples cannot take is refused at compile, naming the key and the layer.
TEST(SpatialProgram, RefusesADecompositionTheInputCannotTake) {
  Communicator& world = test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a split";
  Graph g;
  const ValueId x = g.input("x", Shape{1, 3, 40}, Layout::channels_last);
  ConvOptions c;
  c.out_channels = 2;
  c.kernel = {9, 1};  // a 33-row reach along the 3 rows that are split
  c.dilation = {4, 1};
  c.same = true;
  g.mark_output(g.add("wide", layers::conv(c), {x}));
  CompileOptions o;
  o.spatial = make_spatial_split(world, SpatialGrid{{world.size(), 1}});
  o.loss = false;
  o.training = false;
  auto backend = make_backend("reference");
  try {
    Executor ex(g, *backend, o);
    ADD_FAILURE() << "a 3-row axis split " << world.size() << " ways was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    const std::string m = e.what();
    EXPECT_NE(m.find("dist.spatial"), std::string::npos) << m;
    EXPECT_NE(m.find("'wide'"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace crest
