// What a node stages of each sample file under a spatial split (dist.spatial with
// data.stage_dir; docs/data.md, "Staging"): where a spatial group spans nodes, a node's ranks
// read only their blocks of every sample, so it stages only those bytes of each npy array shaped
// as the samples (data.sample_shape, C order: CosmoFlow's `.data.npy`, DeepCAM's npy pairs'
// data files), with its header; every other file (labels, DeepCAM's fused files, HDF5,
// TFRecord, stats.h5) whole.
#pragma once
#include "crest/data/staging.hpp"
#include "crest/train/config.hpp"

namespace crest {

class Communicator;

// Sets stage.parts and stage.parts_text to the blocks this node's ranks read, where some node
// reads only part of every sample; leaves them unset where every node reads whole samples (each
// spatial group within one node, or no split). Collective over `world`, the job.
void stage_node_parts(const Config& config, Communicator& world, StageOptions& stage);

}  // namespace crest
