// A compiled program split spatially (docs/distributed.md, "Spatial split"): each rank of a
// spatial group holds a block of every split activation's spatial axes. The compile pass
// split_spatially (src/graph/compile/split_spatially.cpp) decides which values are split from the
// layers' SpatialRole; this interface, implemented by the spatial part (crest/spatial/
// spatial_program.hpp) over the group's communicator, supplies what the pass and the layers need:
// the rank's block of a shape, kernels that run a windowed layer on the rank's part (with halo
// exchanges inside), and the layer that gathers the parts where a layer needs the whole tensor.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/shape.hpp"
#include "crest/graph/window_axis.hpp"

namespace crest {

class Layer;
class ParamShard;  // crest/graph/param_shard.hpp

class SpatialSplit {
 public:
  virtual ~SpatialSplit() = default;
  // Ranks in the spatial group (1: nothing is split).
  virtual int group_size() const = 0;
  // Whether a graph input of this shape ([n, c, spatial...], batch included) is split: its
  // spatial rank is the grid's.
  virtual bool splits(const Shape& global) const = 0;
  // This rank's block of a split activation.
  virtual Shape local_shape(const Shape& global) const = 0;
  // Where that block starts along each spatial axis.
  virtual std::vector<int64_t> block_start(const Shape& global) const = 0;
  // Copies this rank's block out of a whole split value: how a batch of whole samples, as the
  // data loader gives them, becomes the program's input. `whole` has logical shape `global` in
  // `layout` (plain or channels-last); `block` is local_shape(global) in the same layout, of the
  // same dtype.
  virtual void copy_block(const void* whole, const Shape& global, Layout layout, DType dtype,
                          void* block) const = 0;
  // Why the group cannot split windowed layer `layer` (Layer::window_axes): some rank would have
  // no output rows, or a halo beyond its neighbours' blocks ("dist.spatial: layer ... extents");
  // "" when it can. Where it cannot, the compile gathers the layer's input and the network runs
  // whole from there on; on the samples themselves it refuses the decomposition with this text.
  virtual std::string refusal(const std::vector<WindowAxis>& axes,
                              const std::string& layer) const = 0;
  // Kernels for this rank's part of a windowed layer described by its global descriptor: inputs
  // and outputs are the rank's blocks, plain or channels-last (their src_format/dst_format).
  // Weight gradients are the rank's share
  // times group_size(), so that averaging every gradient over all ranks (data-parallel sync)
  // gives the sample's gradient, as for the layers every rank of the group computes whole.
  // A decomposition the layer cannot take is refused (crest::Error, exit 2, naming `layer`).
  virtual std::unique_ptr<ConvKernel> conv(Backend& backend, const ConvDesc& global,
                                           const std::string& layer) = 0;
  virtual std::unique_ptr<PoolKernel> pool(Backend& backend, const PoolDesc& global,
                                           const std::string& layer) = 0;
  // The layer the compile inserts before a layer that needs a whole tensor: forward it gathers
  // the group's blocks of a `global`-shaped value (every rank gets the whole), backward each rank
  // keeps its block of the gradient (the layers after it run alike on every rank).
  virtual std::unique_ptr<Layer> gather(const Shape& global) = 0;
  // The layer the compile inserts after a spatial mean (global average pooling) of a split value
  // of shape `global`: forward, the group's sum of the block means [n, c, 1...] each weighted by
  // its block's share of the spatial extent (the sample's mean, alike on every rank); backward,
  // the whole gradient times this rank's share.
  virtual std::unique_ptr<Layer> mean_over_group(const Shape& global) = 0;
  // The layer the compile inserts before a whole value of `shape` that a pointwise layer
  // broadcasts over split blocks: forward a copy, backward the group's sum of the gradients
  // (each rank's is its block's part).
  virtual std::unique_ptr<Layer> broadcast(const Shape& shape) = 0;
  // A matrix layer (SpatialRole::feature_matrix: dense) that reads a split value of whole shape
  // `global` ([n, c, spatial...]) flattened runs on this rank's block's features, which flatten
  // lays out in channels-last order ([n, spatial..., c]). Its weight [rows, features] is divided
  // by columns: the returned part holds the columns of the block's features, in the block's
  // order (so the flattened block multiplies it as it is). The products of the parts are then
  // summed over the group by the layer sum_parts() gives (backward: the whole gradient, copied),
  // and the layer's other parameters (the bias) must be added once: by the rank for which
  // first_in_group() is true.
  virtual std::shared_ptr<const ParamShard> feature_columns(const Shape& global, int64_t rows) = 0;
  // The same block's features as runs of whole features, in the block's flattening order:
  // {first whole feature, count} each. A positional layer (dropout) between the flatten and the
  // feature-matrix layer places its elements with them.
  virtual std::vector<std::pair<int64_t, int64_t>> feature_runs(const Shape& global) const = 0;
  // A loss that is a mean over its prediction's elements (SpatialRole::position_mean), run on the
  // blocks of its inputs: `loss`, compiled for the blocks, gives its block's mean; the returned
  // layer weights that by the block's share of the whole prediction `global` and sums it over
  // the group, so every rank gets the sample's loss. Backward, each rank's gradient is its
  // block's of the sample's loss (the wrapped backward scaled by the share): nothing is sent.
  virtual std::unique_ptr<Layer> loss_over_blocks(std::unique_ptr<Layer> loss,
                                                  const Shape& global) = 0;
  // The layer the compile inserts before a loss on blocks for a whole target it reads (a
  // segmentation's labels, as the data loader gives them): forward, this rank's block of it;
  // no gradient. `global` is [n, c, spatial...] or, for class labels, [n, spatial...].
  virtual std::unique_ptr<Layer> take_block(const Shape& global) = 0;
  virtual std::unique_ptr<Layer> sum_parts(const Shape& shape) = 0;
  // Adds `values` up over the group, in place (collective: every rank of the group calls it with
  // the same count): how counts made on the blocks (a metric's) become the sample's.
  virtual void sum_over_group(double* values, size_t count) const = 0;
  virtual bool first_in_group() const = 0;
  // Bytes this rank receives in the halo exchanges of one batch through the windowed layers
  // split so far (each layer counted once, however often compiled): forward, and backward (the
  // gradient rows returned to it and the weight gradient's second gather). For plans.
  struct HaloTraffic {
    size_t forward = 0, backward = 0;
  };
  virtual HaloTraffic halo_traffic() const = 0;
  // Per split windowed layer (each counted once, however often compiled): how its halo exchange
  // runs ("overlapped: ...", or why not) and the exchanges' times since the last reset: from
  // posting to completion, and how long the layer waited (crest/spatial/halo_exchange.hpp,
  // HaloTiming). For profiles and reports.
  struct HaloLayer {
    std::string layer, overlap;
    int64_t exchanges = 0;
    double transfer_s = 0, exposed_s = 0, hidden_fraction = 0;
  };
  virtual std::vector<HaloLayer> halo_layers() const = 0;
  virtual void reset_halo_timing() = 0;
};

}  // namespace crest
