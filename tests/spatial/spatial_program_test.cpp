// A whole compiled program split spatially (CompileOptions::spatial, the split_spatially pass),
// under mpirun: a small CosmoFlow-shaped 3-D network — convolutions with fused activations,
// dropout on the split blocks, max and average pooling, a residual add of two split values,
// flatten, dropout, dense, MSE — run
// unsplit on every rank and split over the group, for every decomposition of the world's size.
// The loss, the prediction, the gradient of the input block, and every parameter gradient
// averaged over the group (as data-parallel averaging does) equal the unsplit program's: within
// 1e-10 in float64 on the reference backend, 1e-5 relative in float32 on oneDNN. A 2-D network
// with DeepCAM's strided and dilated convolutions, dropout on blocks split along one or two axes,
// a concatenation of split values and a padded
// strided max pooling runs the same checks, and so does a segmentation decoder shaped as
// DeepCAM's (image pooling, expand_as, transposed convolutions, a prediction that keeps the
// spatial axes and a per-pixel loss, which runs on the prediction's blocks), and so does a
// network whose per-voxel loss reads split values only. A CosmoFlow-shaped head (flatten straight
// into a dense layer with an L2 penalty) runs with the dense weight divided by columns among the
// group: its part's gradient equals the unsplit gradient's columns for the rank's block.
#include "crest/spatial/spatial_program.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crest/backends/batch_stat_reducer.hpp"
#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/graph/param_shard.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "world.hpp"

namespace crest {
namespace {

using test::expect_close;
using test::has_backend;
using test::random_values;
using test::read;
using test::write;

constexpr int64_t kBatch = 2, kChannels = 2;
const std::vector<int64_t> kVolume{16, 12, 10};
const std::vector<int64_t> kField{24, 21};

// A network and the spatial extents of its samples (x: [2, extents...] channels-last); y is [3]
// floats, or with `classes` int32 labels [extents...] (a segmentation's), or with
// `voxel_target` floats shaped as x (a per-voxel regression's).
struct Network {
  Graph graph;
  std::vector<int64_t> extents;
  int classes = 0;
  bool voxel_target = false;
};

// x [2, 16, 12, 10] channels-last -> conv 3^3 (4) + leaky -> dropout -> max-pool 2 ->
// {conv 3^3 + tanh} + conv 1^3 -> avg-pool 2 -> flatten -> dropout -> dense (3) -> MSE against
// y [3]. Both dropouts run on the blocks (the second on the flattened block's features): their
// masks are the unsplit run's only if each rank draws its elements at their positions in the
// whole tensor.
Network small_volume_network() {
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
  t = g.add("drop1", layers::dropout(0.25f), {t});
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
  return {g, kVolume};
}

// x [2, 16, 12, 10] -> conv 3^3 (4) + leaky -> max-pool 2 -> conv 3^3 (3) -> flatten -> dense (3,
// L2 0.01, PyTorch's initialisation: a bias that is not zero) -> MSE against y [3]: CosmoFlow's
// head, whose dense layer reads the flattened blocks.
Network dense_head_network() {
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
  t = g.add("pool1", layers::pool(PoolOptions{}), {t});
  c.out_channels = 3;
  t = g.add("conv2", layers::conv(c), {t});
  t = g.add("flatten", layers::flatten(), {t});
  DenseOptions d;
  d.out_features = 3;
  d.l2 = 0.01;
  d.init = Init::torch_default;  // a bias that is not zero: added once, not once per rank
  const ValueId out = g.add("fc", layers::dense(d), {t});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::mse_loss(), {out, y}));
  return {g, kVolume};
}

// A 3x3 convolution with stride 2 and 'same' padding to 4 channels (DeepCAM's downsampling).
ConvOptions strided_3x3() {
  ConvOptions c;
  c.out_channels = 4;
  c.kernel = {3, 3};
  c.stride = {2, 2};
  c.same = true;
  return c;
}

// DeepCAM's shapes in 2-D: x [2, 24, 21] -> conv 3x3 stride 2 'same' (4) -> batch norm + relu
// -> dropout -> conv 3x3 dilation 2 'same' (4) -> concat with its input -> max-pool 3 stride 2
// padding 1 -> flatten -> dense (3) -> MSE against y [3]. The batch norm runs on the blocks, its
// statistics summed over the group.
Network small_field_network() {
  Graph g;
  const ValueId x = g.input("x", Shape{kChannels, kField[0], kField[1]}, Layout::channels_last);
  const ValueId y = g.input("y", Shape{3});
  ConvOptions c = strided_3x3();
  ValueId t = g.add("conv1", layers::conv(c), {x});
  t = g.add("bn1", layers::batch_norm(), {t});
  t = g.add("act1", layers::relu(), {t});
  t = g.add("drop1", layers::dropout(0.25f), {t});
  ConvOptions d = c;
  d.stride = {1, 1};
  d.dilation = {2, 2};
  const ValueId u = g.add("conv2", layers::conv(d), {t});
  t = g.add("concat", layers::concat(), {u, t});
  PoolOptions p;
  p.kernel = {3, 3};
  p.stride = {2, 2};
  p.padding = {1, 1};
  t = g.add("pool", layers::pool(p), {t});
  t = g.add("flatten", layers::flatten(), {t});
  DenseOptions dense;
  dense.out_features = 3;
  const ValueId out = g.add("fc", layers::dense(dense), {t});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::mse_loss(), {out, y}));
  return {g, kField};
}

// DeepLabv3+'s decoder in 2-D (DeepCAM's layer kinds after the encoder): x [2, 24, 20] -> conv 3x3
// stride 2 (4) + batch norm + relu = low [12, 10] -> conv 3x3 stride 2 (4) + relu = f [6, 5];
// image pooling: global average of f -> conv 1x1 (3) + relu -> expand_as f; concat with a dilated
// conv of f -> conv 1x1 (4) -> transposed conv 3x3 stride 2 (padding 1, output padding 1) to
// [12, 10] -> concat with low -> conv 3x3 (4) + relu -> transposed conv to [24, 20] (3 classes):
// the marked output, a per-pixel weighted softmax cross-entropy against int32 labels.
Network small_decoder_network() {
  const std::vector<int64_t> field{24, 20};
  Graph g;
  const ValueId x = g.input("x", Shape{kChannels, field[0], field[1]}, Layout::channels_last);
  const ValueId y = g.input("y", Shape{field[0], field[1]}, Layout::plain, /*integer=*/true);
  ConvOptions c = strided_3x3();
  ValueId low = g.add("conv1", layers::conv(c), {x});
  low = g.add("act1", layers::relu(), {g.add("bn1", layers::batch_norm(), {low})});
  const ValueId f = g.add("act2", layers::relu(), {g.add("conv2", layers::conv(c), {low})});
  PoolOptions global;
  global.global = true;
  ConvOptions one;
  one.out_channels = 3;
  one.kernel = {1, 1};
  ValueId pooled = g.add("image_pool", layers::pool(global), {f});
  pooled = g.add("pool_act", layers::relu(), {g.add("pool_conv", layers::conv(one), {pooled})});
  const ValueId expanded = g.add("expand", layers::expand_as(), {pooled, f});
  ConvOptions dilated = c;
  dilated.stride = {1, 1};
  dilated.dilation = {2, 2};
  const ValueId a = g.add("aspp", layers::conv(dilated), {f});
  one.out_channels = 4;
  ValueId t =
      g.add("project", layers::conv(one), {g.add("concat1", layers::concat(), {a, expanded})});
  ConvOptions up;
  up.out_channels = 4;
  up.kernel = {3, 3};
  up.stride = {2, 2};
  up.padding = {1, 1};
  up.output_padding = {1, 1};
  t = g.add("deconv1", layers::conv_transpose(up), {t});
  t = g.add("concat2", layers::concat(), {t, low});
  ConvOptions same = c;
  same.stride = {1, 1};
  t = g.add("act3", layers::relu(), {g.add("conv3", layers::conv(same), {t})});
  up.out_channels = 3;
  const ValueId out = g.add("deconv2", layers::conv_transpose(up), {t});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::softmax_cross_entropy({1.0f, 2.0f, 0.5f}), {out, y}));
  return {g, field, 3};
}

// x [2, 16, 12, 10] -> conv 3^3 (4) + tanh -> conv 3^3 stride 1 (2) -> MSE against y [2, 16, 12,
// 10] per voxel (a denoising or super-resolution target). Nothing is marked: the loss reads the
// split prediction and the split target, and no rank ever holds a whole activation.
Network voxel_regression_network() {
  Graph g;
  const Shape volume{kChannels, kVolume[0], kVolume[1], kVolume[2]};
  const ValueId x = g.input("x", volume, Layout::channels_last);
  const ValueId y = g.input("y", volume, Layout::channels_last);
  ConvOptions c;
  c.out_channels = 4;
  c.kernel = {3, 3, 3};
  c.same = true;
  ValueId t = g.add("act1", layers::tanh(), {g.add("conv1", layers::conv(c), {x})});
  c.out_channels = kChannels;
  t = g.add("conv2", layers::conv(c), {t});
  g.set_loss(g.add("loss", layers::mse_loss(), {t, y}));
  Network net{g, kVolume};
  net.voxel_target = true;
  return net;
}

// [n, c, extents...]: the whole sample batch's logical shape.
Shape batch_shape(const std::vector<int64_t>& extents) {
  std::vector<int64_t> dims{kBatch, kChannels};
  dims.insert(dims.end(), extents.begin(), extents.end());
  return Shape(dims);
}

// This rank's block (of logical shape `local`, at `offset` along the spatial axes) of a
// channels-last [n, spatial..., c] array of doubles.
std::vector<double> block_of(const std::vector<double>& whole, const std::vector<int64_t>& extents,
                             const Shape& local, const std::vector<int64_t>& offset) {
  std::vector<int64_t> dims{kBatch}, count{kBatch}, start{0};
  for (size_t a = 0; a < extents.size(); ++a) {
    dims.push_back(extents[a]);
    count.push_back(local[static_cast<int>(a) + 2]);
    start.push_back(offset[a]);
  }
  dims.push_back(kChannels);
  count.push_back(kChannels);
  start.push_back(0);
  std::vector<double> out(static_cast<size_t>(numel_of(count)));
  box_transfer(whole.data(), BoxAt{dims, start}, out.data(),
               BoxAt{count, std::vector<int64_t>(count.size(), 0)}, count, DType::f64, BoxOp::copy);
  return out;
}

// Where this rank's block starts (numpy.array_split blocks over the grid).
std::vector<int64_t> block_offset(const std::vector<int64_t>& extents, const SpatialGrid& grid,
                                  int rank) {
  const std::vector<int> c = grid.coords(rank);
  std::vector<int64_t> o;
  for (size_t a = 0; a < extents.size(); ++a)
    o.push_back(block_range(extents[a], grid.parts[a], c[a]).begin);
  return o;
}

struct StepResult {
  double loss = 0;
  std::vector<double> prediction, input_grad;
  std::vector<std::vector<double>> grads;                 // per trainable slot
  std::vector<std::shared_ptr<const ParamShard>> shards;  // per trainable slot: divided ones
  std::vector<std::vector<double>> state;  // per other slot: batch norm's running statistics
};

// Batch norm's sums over the whole world (the spatial group in these tests).
class WorldStatReducer final : public BatchStatReducer {
 public:
  void allreduce_sum(double* data, size_t n) override { test::world().allreduce_sum(data, n); }
};

StepResult run_step(const Graph& g, Backend& backend, CompileOptions o,
                    const std::vector<double>& x, int classes,
                    const std::vector<double>& voxel_target = {}) {
  o.batch = kBatch;
  o.seed = 7;
  o.input_grads = true;
  Executor ex(g, backend, o);
  WorldStatReducer group_statistics;
  if (o.spatial) ex.set_batch_stat_reducer(&group_statistics);
  write(ex.input("x"), x);
  if (!voxel_target.empty()) {
    write(ex.input("y"), voxel_target);
  } else if (classes == 0) {
    write(ex.input("y"), random_values(kBatch * 3, 2));
  } else {
    // Drawn, not a formula of the index: a periodic pattern gives blocks at some offsets the
    // same labels, and a wrong block of them would pass.
    const TensorView labels = ex.input("y");
    std::mt19937 draw(11);
    std::uniform_int_distribution<int32_t> label(0, classes - 1);
    for (int64_t i = 0; i < labels.desc().shape.numel(); ++i) labels.as<int32_t>()[i] = label(draw);
  }
  StepResult r;
  r.loss = ex.forward();
  ex.backward();
  if (!g.outputs().empty()) r.prediction = read(ex.output(g.outputs()[0]));
  r.input_grad = read(ex.input_grad("x"));
  for (size_t s = 0; s < ex.params().slots().size(); ++s) {
    if (ex.params().slots()[s].spec.trainable) {
      r.grads.push_back(read(ex.params().grad(s)));
      r.shards.push_back(ex.params().slots()[s].spec.shard);
    } else
      r.state.push_back(read(ex.params().value(s)));
  }
  return r;
}

// Every decomposition of the world's size over the axes (one axis, or 2 x 2 on 4 ranks).
std::vector<std::vector<int>> decompositions(int ranks, size_t axes) {
  std::vector<std::vector<int>> out;
  for (size_t a = 0; a < axes; ++a) {
    std::vector<int> p(axes, 1);
    p[a] = ranks;
    out.push_back(p);
    for (size_t b = a + 1; b < axes && ranks == 4; ++b) {
      std::vector<int> q(axes, 1);
      q[a] = 2;
      q[b] = 2;
      out.push_back(q);
    }
  }
  return out;
}

// This rank's block of a whole plain [n, c, spatial...] tensor.
std::vector<double> plain_block(const std::vector<double>& whole, const Shape& global,
                                const Shape& local, const std::vector<int64_t>& offset) {
  std::vector<int64_t> start{0, 0};
  start.insert(start.end(), offset.begin(), offset.end());
  std::vector<double> out(static_cast<size_t>(local.numel()));
  box_transfer(whole.data(), BoxAt{global.to_vector(), start}, out.data(),
               BoxAt{local.to_vector(), std::vector<int64_t>(start.size(), 0)}, local.to_vector(),
               DType::f64, BoxOp::copy);
  return out;
}

// With split_outputs (the trainer's programs) the marked prediction stays this rank's block of
// the whole one, and nothing gathers it; the loss is the same.
void check_split_outputs(const Network& net, Backend& backend, CompileOptions split,
                         const SpatialGrid& grid, const std::vector<double>& x,
                         const std::vector<double>& y, const StepResult& whole) {
  SCOPED_TRACE("split_outputs");
  split.split_outputs = true;
  const Graph& g = net.graph;
  const Shape local_x = split.spatial->local_shape(batch_shape(net.extents));
  const auto x_at = block_offset(net.extents, grid, test::world().rank());
  const StepResult mine =
      run_step(g, backend, split, block_of(x, net.extents, local_x, x_at), net.classes,
               y.empty() ? y : block_of(y, net.extents, local_x, x_at));
  split.batch = kBatch;
  Executor ex(g, backend, split);
  const Shape global = ex.output_whole_shape(g.outputs()[0]);
  const Shape local = ex.output(g.outputs()[0]).shape();
  ASSERT_EQ(global.numel(), static_cast<int64_t>(whole.prediction.size()));
  std::vector<int64_t> extents = global.to_vector();
  extents.erase(extents.begin(), extents.begin() + 2);
  // Where the network ran whole from some layer on (a volume too small for the grid), the
  // prediction is whole too.
  const std::vector<double> want =
      local == global ? whole.prediction
                      : plain_block(whole.prediction, global, local,
                                    block_offset(extents, grid, test::world().rank()));
  const double tol = split.dtype == DType::f64 ? 1e-10 : 1e-5;
  EXPECT_NEAR(mine.loss, whole.loss, tol * (1 + std::fabs(whole.loss)));
  expect_close(mine.prediction, want, tol, "the prediction's block");
}

void check_program(const Network& net, const std::string& backend_name, DType dtype, double tol) {
  Communicator& world = test::world();
  auto backend = make_backend(backend_name);
  const Graph& g = net.graph;
  const auto x = random_values(size_t(batch_shape(net.extents).numel()), 1);
  const auto y = net.voxel_target ? random_values(x.size(), 3) : std::vector<double>{};
  CompileOptions base;
  base.dtype = dtype;
  const StepResult whole = run_step(g, *backend, base, x, net.classes, y);
  for (const auto& parts : decompositions(world.size(), net.extents.size())) {
    std::string trace = "dist.spatial";
    for (int p : parts) trace += " " + std::to_string(p);
    SCOPED_TRACE(trace);
    const SpatialGrid grid{parts};
    CompileOptions split = base;
    split.spatial = make_spatial_split(world, grid);
    const Shape local = split.spatial->local_shape(batch_shape(net.extents));
    const auto offset = block_offset(net.extents, grid, world.rank());
    const StepResult mine =
        run_step(g, *backend, split, block_of(x, net.extents, local, offset), net.classes,
                 y.empty() ? y : block_of(y, net.extents, local, offset));
    EXPECT_NEAR(mine.loss, whole.loss, tol * (1 + std::fabs(whole.loss)));
    expect_close(mine.prediction, whole.prediction, tol, "prediction");
    if (!g.outputs().empty()) check_split_outputs(net, *backend, split, grid, x, y, whole);
    expect_close(mine.input_grad, block_of(whole.input_grad, net.extents, local, offset), tol,
                 "input gradient");
    ASSERT_EQ(mine.grads.size(), whole.grads.size());
    ASSERT_EQ(mine.state.size(), whole.state.size());
    for (size_t s = 0; s < mine.state.size(); ++s)
      expect_close(mine.state[s], whole.state[s], tol, "running statistic " + std::to_string(s));
    for (size_t s = 0; s < mine.grads.size(); ++s) {
      if (const auto& shard = mine.shards[s]) {  // the rank's columns of the whole gradient
        ASSERT_EQ(shard->whole_shape().numel(), static_cast<int64_t>(whole.grads[s].size()));
        std::vector<double> columns(mine.grads[s].size());
        shard->take_part(whole.grads[s].data(), columns.data(), DType::f64);
        expect_close(mine.grads[s], columns, tol, "gradient of divided slot " + std::to_string(s));
        continue;
      }
      std::vector<double> mean = mine.grads[s];
      world.allreduce_sum(mean.data(), mean.size());
      for (double& v : mean) v /= world.size();
      expect_close(mean, whole.grads[s], tol, "gradient of trainable slot " + std::to_string(s));
    }
  }
}

// The names of the ops a split inserted ("kind name"), for `parts`.
std::vector<std::string> inserted_ops(const Graph& g, const std::vector<int>& parts,
                                      bool split_outputs = false) {
  auto backend = make_backend("reference");
  CompileOptions o;
  o.split_outputs = split_outputs;
  o.dtype = DType::f64;
  o.batch = kBatch;
  o.spatial = make_spatial_split(test::world(), SpatialGrid{parts});
  Executor ex(g, *backend, o);
  std::vector<std::string> inserted;
  for (const OpProfile& op : ex.profile())
    if (op.kind.rfind("spatial_", 0) == 0) inserted.push_back(op.kind + " " + op.name);
  return inserted;
}

TEST(SpatialProgram, SmallNetworkFloat64OnTheReferenceBackend) {
  const Network net = small_volume_network();
  check_program(net, "reference", DType::f64, 1e-10);
  // The dropout on conv1's output runs on the blocks and the one after flatten on the block's
  // features, each element's mask drawn at its place in the whole tensor: nothing is gathered,
  // and the dense layer's parts' products are summed. (Split along the width, whose block's
  // features are not one run of the whole's, on 2 ranks: 4 would leave pool2 too few columns.)
  const int ranks = test::world().size();
  if (ranks < 2) return;
  EXPECT_EQ(inserted_ops(net.graph, {ranks, 1, 1}),
            (std::vector<std::string>{"spatial_sum fc>sum"}));
  if (ranks == 2) {
    EXPECT_EQ(inserted_ops(net.graph, {1, 1, 2}), (std::vector<std::string>{"spatial_sum fc>sum"}));
  }
}

// The dense layer after flatten runs on each rank's block with its columns of the weight: no
// gather, one sum of the parts' products, and no rank holds the whole weight.
TEST(SpatialProgram, DenseHeadOnBlocksFloat64OnTheReferenceBackend) {
  const Network net = dense_head_network();
  check_program(net, "reference", DType::f64, 1e-10);
  Communicator& world = test::world();
  if (world.size() < 2) return;
  EXPECT_EQ(inserted_ops(net.graph, {world.size(), 1, 1}),
            (std::vector<std::string>{"spatial_sum fc>sum"}));
  auto backend = make_backend("reference");
  CompileOptions o;
  o.dtype = DType::f64;
  o.batch = kBatch;
  o.spatial = make_spatial_split(world, SpatialGrid{{1, 1, world.size()}});
  Executor ex(net.graph, *backend, o);
  const ParamStore& params = ex.params();
  const ParamSlot& weight = params.slots()[static_cast<size_t>(params.find("fc.weight"))];
  ASSERT_TRUE(weight.spec.shard);
  // 8 x 6 x 5 x 3 features, the width's 5 columns split 3 / 2 (4 ranks: 2 / 1 / 1 / 1).
  EXPECT_EQ(weight.spec.shard->whole_shape(), (Shape{3, 720}));
  double features = static_cast<double>(weight.shape[1]);
  world.allreduce_sum(&features, 1);
  EXPECT_EQ(features, 720);
  EXPECT_FALSE(params.slots()[static_cast<size_t>(params.find("fc.bias"))].spec.shard);
}

TEST(SpatialProgram, StridedDilatedFieldNetworkFloat64OnTheReferenceBackend) {
  check_program(small_field_network(), "reference", DType::f64, 1e-10);
}

// The decoder runs split to its last layer: image pooling as the group's mean, its features
// broadcast over the blocks, transposed convolutions on blocks, and the prediction returned whole.
TEST(SpatialProgram, SegmentationDecoderFloat64OnTheReferenceBackend) {
  const Network net = small_decoder_network();
  check_program(net, "reference", DType::f64, 1e-10);
  // Split 2 ways along the width: nothing is gathered but the prediction, for the caller; the
  // loss reads the prediction's block and the block of the labels. (On 4 ranks the 5-column
  // feature map is too narrow for the dilated convolution's halo: from there the network runs
  // gathered and the loss whole, which check_program covered.)
  if (test::world().size() != 2) return;
  EXPECT_EQ(inserted_ops(net.graph, {1, 2}),
            (std::vector<std::string>{
                "spatial_mean image_pool>group", "spatial_broadcast pool_act>broadcast",
                "spatial_gather deconv2>block>gather", "spatial_block y>block"}));
  // The trainer's program (split_outputs) keeps the prediction as the block: no gather at all.
  EXPECT_EQ(
      inserted_ops(net.graph, {1, 2}, true),
      (std::vector<std::string>{"spatial_mean image_pool>group",
                                "spatial_broadcast pool_act>broadcast", "spatial_block y>block"}));
  auto backend = make_backend("reference");
  CompileOptions o;
  o.dtype = DType::f64;
  o.batch = kBatch;
  o.spatial = make_spatial_split(test::world(), SpatialGrid{{1, 2}});
  Executor ex(net.graph, *backend, o);
  for (const OpProfile& op : ex.profile())
    if (op.name == "deconv2") {
      EXPECT_EQ(op.implementation.rfind("split", 0), 0u) << op.implementation;
    }
  // 20 columns over 2 ranks: the loss reads [2, 3, 24, 10]; the gathered prediction is only
  // returned, its gather's backward never runs.
  for (const OpFacts& op : ex.op_facts()) {
    if (op.name == "loss") {
      EXPECT_EQ(op.in, (Shape{kBatch, 3, 24, 10}));
    }
    if (op.kind == "spatial_gather") {
      EXPECT_FALSE(op.runs_backward) << op.name;
    }
  }
}

// A per-voxel loss on split values only: the split target is the loader's block, and nothing
// is gathered at all.
TEST(SpatialProgram, VoxelLossOnBlocksFloat64OnTheReferenceBackend) {
  const Network net = voxel_regression_network();
  check_program(net, "reference", DType::f64, 1e-10);
  if (test::world().size() < 2) return;
  EXPECT_TRUE(inserted_ops(net.graph, {test::world().size(), 1, 1}).empty());
}

TEST(SpatialProgram, SmallNetworkFloat32OnOneDnn) {
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  check_program(small_volume_network(), "onednn", DType::f32, 1e-5);
  check_program(small_field_network(), "onednn", DType::f32, 1e-5);
  check_program(small_decoder_network(), "onednn", DType::f32, 1e-5);
  check_program(dense_head_network(), "onednn", DType::f32, 1e-5);
  check_program(voxel_regression_network(), "onednn", DType::f32, 1e-5);
}

// Batch norm on blocks without the group's statistics would normalise each block alone: a
// training forward refuses it.
TEST(SpatialProgram, SplitBatchNormWithoutTheGroupsStatisticsIsRefused) {
  Communicator& world = test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a split";
  const Network net = small_field_network();
  auto backend = make_backend("reference");
  CompileOptions o;
  o.dtype = DType::f64;
  o.batch = kBatch;
  o.spatial = make_spatial_split(world, SpatialGrid{{world.size(), 1}});
  Executor ex(net.graph, *backend, o);
  try {
    ex.forward();
    FAIL() << "a split batch norm ran with local statistics";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dist.spatial: batch norm runs on the spatial group's "
                                         "blocks and needs the group's statistics"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(ex.forward(false)) << "evaluation uses the running statistics";
}

// A decomposition the samples cannot take is refused at compile, naming the key and the layer.
TEST(SpatialProgram, RefusesADecompositionTheInputCannotTake) {
  Communicator& world = test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a split";
  Graph g;
  // One row along the split axis: some rank would hold nothing. (On 2 ranks any halo is within
  // reach, the neighbour holding the rest of the axis; SpatialTrain.* refuses a wide halo on 4.)
  const ValueId x = g.input("x", Shape{1, 1, 40}, Layout::channels_last);
  ConvOptions c;
  c.out_channels = 2;
  c.kernel = {3, 1};
  c.same = true;
  g.mark_output(g.add("wide", layers::conv(c), {x}));
  CompileOptions o;
  o.spatial = make_spatial_split(world, SpatialGrid{{world.size(), 1}});
  o.loss = false;
  o.training = false;
  auto backend = make_backend("reference");
  try {
    Executor ex(g, *backend, o);
    ADD_FAILURE() << "a 1-row axis split " << world.size() << " ways was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    const std::string m = e.what();
    EXPECT_NE(m.find("dist.spatial"), std::string::npos) << m;
    EXPECT_NE(m.find("'wide'"), std::string::npos) << m;
    EXPECT_NE(m.find("fewer rows than parts"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace crest
