// make_spatial_split (spatial_program.hpp): the kernels and the layers a split program runs.
#include "crest/spatial/spatial_program.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/graph/layer.hpp"
#include "crest/spatial/feature_columns.hpp"
#include "crest/spatial/loss_on_blocks.hpp"
#include "crest/spatial/spatial_window.hpp"

namespace crest {
namespace {

// Multiplies n values of `dtype` (float32 or float64) by k.
void scale(void* p, int64_t n, DType dtype, double k) {
  if (dtype == DType::f64) {
    for (int64_t i = 0; i < n; ++i) static_cast<double*>(p)[i] *= k;
  } else {
    CREST_CHECK(dtype == DType::f32, "split weight gradients are float32 or float64");
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(p)[i] *= static_cast<float>(k);
  }
}

// A convolution on this rank's block, as the executor's ConvKernel.
class SplitConvKernel final : public ConvKernel {
 public:
  SplitConvKernel(Backend& backend, const ConvDesc& global, SpatialPlacement where)
      : conv_(backend, global, std::move(where), Layout::channels_last),
        group_size_(conv_.placement().grid.size()),
        weight_count_(global.out_channels * global.in_channels / global.groups) {
    for (int i = 0; i < global.spatial_rank; ++i)
      weight_count_ *= global.kernel[static_cast<size_t>(i)];
  }
  MemFormat src_format() const override { return conv_.src_block_format(); }
  MemFormat dst_format() const override { return conv_.dst_block_format(); }
  size_t scratch_bytes() const override { return conv_.scratch_bytes(); }
  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    conv_.forward(src, weights, bias, dst, scratch);
  }
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    conv_.backward_data(diff_dst, weights, diff_src, scratch);
  }
  // The rank's share times the group's size: the data-parallel average over all ranks then
  // gives the sample's gradient (SpatialSplit::conv).
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    conv_.backward_weights(src, diff_dst, diff_weights, diff_bias, scratch);
    const DType dtype = conv_.local().dtype;
    scale(diff_weights, weight_count_, dtype, group_size_);
    if (diff_bias) scale(diff_bias, conv_.local().out_channels, dtype, group_size_);
  }
  std::string implementation() const override {
    return "split " + std::to_string(group_size_) + " ways: " + conv_.implementation();
  }
  const HaloExchange& halo() const { return conv_.halo(); }
  const std::string& overlap_note() const { return conv_.overlap_note(); }
  size_t backward_halo_bytes() const { return conv_.backward_halo_bytes(); }
  bool data_grad_from_output() const { return conv_.data_grad_from_output(); }
  const std::string& data_grad_note() const { return conv_.data_grad_note(); }

 private:
  SpatialConv conv_;
  int group_size_;
  int64_t weight_count_;
};

class SplitPoolKernel final : public PoolKernel {
 public:
  SplitPoolKernel(Backend& backend, const PoolDesc& global, SpatialPlacement where)
      : pool_(backend, global, std::move(where), Layout::channels_last) {}
  MemFormat src_format() const override { return pool_.src_block_format(); }
  MemFormat dst_format() const override { return pool_.dst_block_format(); }
  size_t workspace_bytes() const override { return pool_.workspace_bytes(); }
  size_t scratch_bytes() const override { return pool_.scratch_bytes(); }
  void forward(const void* src, void* dst, void* workspace, void* scratch) override {
    pool_.forward(src, dst, workspace, scratch);
  }
  void backward(const void* diff_dst, const void* workspace, void* diff_src,
                void* scratch) override {
    pool_.backward(diff_dst, workspace, diff_src, scratch);
  }
  const HaloExchange& halo() const { return pool_.halo(); }
  const std::string& overlap_note() const { return pool_.overlap_note(); }

 private:
  SpatialPool pool_;
};

// Where block `b` of a [n, c, spatial...] tensor starts, and its extents.
std::pair<std::vector<int64_t>, std::vector<int64_t>> box_of(const Shape& global,
                                                             const std::vector<IndexRange>& b) {
  std::vector<int64_t> start(static_cast<size_t>(global.rank()), 0), count = global.to_vector();
  for (size_t a = 0; a < b.size(); ++a) {
    start[a + 2] = b[a].begin;
    count[a + 2] = b[a].size();
  }
  return {start, count};
}

// Before a layer that needs the whole tensor: every rank gets every block (allgather), and
// backward keeps its own block of the gradient, which every rank of the group computed alike.
class SpatialGatherLayer final : public Layer {
 public:
  SpatialGatherLayer(Communicator& group, SpatialGrid grid, Shape global)
      : group_(&group),
        grid_(std::move(grid)),
        global_(global),
        blocks_(blocks_of(grid_, global)) {}
  std::string kind() const override { return "spatial_gather"; }
  bool computes_in_half() const override { return false; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>&) const override { return {global_}; }
  void create(CreateContext& ctx) override {
    dtype_ = ctx.dtype;
    ctx.in_formats[0] = plain_format(ctx.in_shapes[0], dtype_);
    ctx.out_formats = {plain_format(global_, dtype_)};
  }
  void forward(RunContext& ctx) override {
    const auto [own_start, own_count] = box_of(global_, blocks_[size_t(group_->rank())]);
    const size_t bytes = static_cast<size_t>(numel_of(own_count)) * dtype_size(dtype_);
    const auto* in = static_cast<const std::byte*>(ctx.in[0]);
    const auto parts = group_->allgather_parts(std::vector<std::byte>(in, in + bytes));
    const std::vector<int64_t> global_dims = global_.to_vector();
    for (size_t r = 0; r < parts.size(); ++r) {
      const auto [start, count] = box_of(global_, blocks_[r]);
      box_transfer(parts[r].data(), BoxAt{count, std::vector<int64_t>(count.size(), 0)}, ctx.out[0],
                   BoxAt{global_dims, start}, count, dtype_, BoxOp::copy);
    }
  }
  void backward(RunContext& ctx) override {
    if (!ctx.diff_in[0]) return;
    const auto [start, count] = box_of(global_, blocks_[size_t(group_->rank())]);
    box_transfer(ctx.diff_out[0], BoxAt{global_.to_vector(), start}, ctx.diff_in[0],
                 BoxAt{count, std::vector<int64_t>(count.size(), 0)}, count, dtype_, BoxOp::copy);
  }
  std::string describe() const override {
    return "gathers " + std::to_string(grid_.size()) + " blocks";
  }

 private:
  Communicator* group_;
  SpatialGrid grid_;
  Shape global_;
  std::vector<std::vector<IndexRange>> blocks_;
  DType dtype_ = DType::f32;
};

// Values of `dtype` (float32 or float64) times k, into `out` (which may be `in`); with `group`,
// summed over it first (in double, as batch norm's sums: every rank gets the same bits). `v`:
// the caller's buffer of n doubles, so a step allocates nothing.
void weighted_sum(const void* in, void* out, std::vector<double>& v, DType dtype, double k,
                  Communicator* group) {
  const bool f64 = dtype == DType::f64;
  CREST_CHECK(f64 || dtype == DType::f32, "a group sum is of float32 or float64 values");
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = k * (f64 ? static_cast<const double*>(in)[i] : static_cast<const float*>(in)[i]);
  if (group) group->allreduce_sum(v.data(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (f64)
      static_cast<double*>(out)[i] = v[i];
    else
      static_cast<float*>(out)[i] = static_cast<float>(v[i]);
  }
}

// A small whole tensor ([n, c, 1...]) that one direction sums over the group: a spatial mean's
// block means become the sample's (forward sum, each weighted by its share), or a broadcast
// value's per-block gradients the whole gradient (backward sum). The other direction scales by
// the share (mean) or copies (broadcast).
class GroupSumLayer final : public Layer {
 public:
  enum class Sum : uint8_t { forward, backward };
  GroupSumLayer(Communicator& group, Shape shape, Sum sum, double share, std::string kind)
      : group_(&group), shape_(shape), sum_(sum), share_(share), kind_(std::move(kind)) {}
  std::string kind() const override { return kind_; }
  bool computes_in_half() const override { return false; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>&) const override { return {shape_}; }
  void create(CreateContext& ctx) override {
    dtype_ = ctx.dtype;
    ctx.in_formats[0] = plain_format(shape_, dtype_);
    ctx.out_formats = {plain_format(shape_, dtype_)};
    sums_.resize(static_cast<size_t>(shape_.numel()));
  }
  void forward(RunContext& ctx) override {
    weighted_sum(ctx.in[0], ctx.out[0], sums_, dtype_, share_,
                 sum_ == Sum::forward ? group_ : nullptr);
  }
  void backward(RunContext& ctx) override {
    if (!ctx.diff_in[0]) return;
    weighted_sum(ctx.diff_out[0], ctx.diff_in[0], sums_, dtype_, share_,
                 sum_ == Sum::backward ? group_ : nullptr);
  }
  std::string describe() const override {
    if (sum_ == Sum::backward) return "broadcast over the blocks, gradient summed over the group";
    return share_ == 1.0 ? "the parts' products summed over the group"
                         : "block means weighted by their share, summed over the group";
  }

 private:
  Communicator* group_;
  Shape shape_;
  Sum sum_;
  double share_;
  std::string kind_;
  DType dtype_ = DType::f32;
  std::vector<double> sums_;  // the values in double, summed over the group
};

class GroupSplit final : public SpatialSplit {
 public:
  GroupSplit(Communicator& group, Communicator* replicas, SpatialGrid grid, HaloOverlapMode overlap)
      : group_(&group), replicas_(replicas), grid_(std::move(grid)), overlap_(overlap) {}
  int group_size() const override { return grid_.size(); }
  bool splits(const Shape& global) const override {
    return global.rank() == static_cast<int>(grid_.parts.size()) + 2;
  }
  Shape local_shape(const Shape& global) const override {
    Shape local = global;
    const auto b = blocks_of(grid_, global)[static_cast<size_t>(group_->rank())];
    for (size_t a = 0; a < b.size(); ++a) local[static_cast<int>(a) + 2] = b[a].size();
    return local;
  }
  std::vector<int64_t> block_start(const Shape& global) const override {
    const auto blocks = blocks_of(grid_, global);
    std::vector<int64_t> start;
    for (const IndexRange& r : blocks[static_cast<size_t>(group_->rank())])
      start.push_back(r.begin);
    return start;
  }
  void copy_block(const void* whole, const Shape& global, Layout layout, DType dtype,
                  void* block) const override {
    auto [start, count] = box_of(global, blocks_of(grid_, global)[size_t(group_->rank())]);
    std::vector<int64_t> dims = global.to_vector();
    if (layout == Layout::channels_last)  // [n, c, spatial...] in memory as [n, spatial..., c]
      for (auto* v : {&dims, &start, &count}) std::rotate(v->begin() + 1, v->begin() + 2, v->end());
    else
      CREST_CHECK(layout == Layout::plain, "a split value is plain or channels-last");
    box_transfer(whole, BoxAt{dims, start}, block,
                 BoxAt{count, std::vector<int64_t>(count.size(), 0)}, count, dtype, BoxOp::copy);
  }
  std::string refusal(const std::vector<WindowAxis>& axes,
                      const std::string& layer) const override {
    try {
      plan_window(axes, SpatialPlacement{group_, grid_, layer});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::unique_ptr<ConvKernel> conv(Backend& backend, const ConvDesc& global,
                                   const std::string& layer) override {
    auto k = std::make_unique<SplitConvKernel>(backend, global, placement(layer));
    traffic_[layer] = {k->halo().gather_received_bytes(), k->backward_halo_bytes()};
    halos_[layer].overlap = k->overlap_note();
    if (k->data_grad_from_output())
      halos_[layer].overlap += "; input gradient " + k->data_grad_note();
    return k;
  }
  std::unique_ptr<PoolKernel> pool(Backend& backend, const PoolDesc& global,
                                   const std::string& layer) override {
    auto k = std::make_unique<SplitPoolKernel>(backend, global, placement(layer));
    traffic_[layer] = {k->halo().gather_received_bytes(), k->halo().gather_sent_bytes()};
    halos_[layer].overlap = k->overlap_note();
    return k;
  }
  std::vector<HaloLayer> halo_layers() const override {
    std::vector<HaloLayer> out;
    for (const auto& [layer, h] : halos_)
      out.push_back({layer, h.overlap, h.timing.exchanges, h.timing.transfer_s, h.timing.exposed_s,
                     h.timing.hidden_fraction()});
    return out;
  }
  void reset_halo_timing() override {
    for (auto& [layer, h] : halos_) h.timing = {};
  }
  HaloTraffic halo_traffic() const override {
    HaloTraffic sum;
    for (const auto& [layer, t] : traffic_) {
      sum.forward += t.forward;
      sum.backward += t.backward;
    }
    return sum;
  }
  std::unique_ptr<Layer> gather(const Shape& global) override {
    return std::make_unique<SpatialGatherLayer>(*group_, grid_, global);
  }
  std::unique_ptr<Layer> mean_over_group(const Shape& global) override {
    const Shape local = local_shape(global);
    Shape means = global;
    for (int a = 2; a < global.rank(); ++a) means[a] = 1;
    const double share = static_cast<double>(local.numel()) / static_cast<double>(global.numel());
    return std::make_unique<GroupSumLayer>(*group_, means, GroupSumLayer::Sum::forward, share,
                                           "spatial_mean");
  }
  std::unique_ptr<Layer> broadcast(const Shape& shape) override {
    return std::make_unique<GroupSumLayer>(*group_, shape, GroupSumLayer::Sum::backward, 1.0,
                                           "spatial_broadcast");
  }
  std::shared_ptr<const ParamShard> feature_columns(const Shape& global, int64_t rows) override {
    return make_feature_columns(*group_, replicas_, grid_, global, rows);
  }
  std::vector<std::pair<int64_t, int64_t>> feature_runs(const Shape& global) const override {
    const auto every_block = block_feature_runs(grid_, global);
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (const ColumnRun& r : every_block[size_t(group_->rank())])
      runs.emplace_back(r.begin, r.count);
    return runs;
  }
  std::unique_ptr<Layer> sum_parts(const Shape& shape) override {
    return std::make_unique<GroupSumLayer>(*group_, shape, GroupSumLayer::Sum::forward, 1.0,
                                           "spatial_sum");
  }
  bool first_in_group() const override { return group_->rank() == 0; }
  void sum_over_group(double* values, size_t count) const override {
    group_->allreduce_sum(values, count);
  }
  std::unique_ptr<Layer> loss_over_blocks(std::unique_ptr<Layer> loss,
                                          const Shape& global) override {
    return make_loss_on_blocks(std::move(loss), *group_, global);
  }
  std::unique_ptr<Layer> take_block(const Shape& global) override {
    return make_take_block(*this, global);
  }

 private:
  // A layer compiled again (a second executor) adds to the same times.
  SpatialPlacement placement(const std::string& layer) {
    return {group_, grid_, layer, overlap_, &halos_[layer].timing};
  }
  Communicator* group_;
  Communicator* replicas_;
  SpatialGrid grid_;
  HaloOverlapMode overlap_;
  std::map<std::string, HaloTraffic> traffic_;  // per split layer
  struct LayerHalo {
    std::string overlap;
    HaloTiming timing;
  };
  std::map<std::string, LayerHalo> halos_;  // per split layer; map nodes stay put
};

}  // namespace

std::shared_ptr<SpatialSplit> make_spatial_split(Communicator& group, SpatialGrid grid,
                                                 HaloOverlapMode overlap, Communicator* replicas) {
  if (grid.size() != group.size())
    throw_usage("dist.spatial: the decomposition has " + std::to_string(grid.size()) +
                " parts but the spatial group has " + std::to_string(group.size()) + " ranks");
  return std::make_shared<GroupSplit>(group, replicas, std::move(grid), overlap);
}

}  // namespace crest
