// What building a model gives the trainer: the network and the roles of its values. Whatever
// made it (a registered C++ model or a YAML graph), the trainer reads only this.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crest/core/dtype.hpp"
#include "crest/graph/graph.hpp"

namespace crest {

// How a parameter is named and stored in the reference framework's weight files where that
// differs from crest's own name and layout (docs/weights.md): PyTorch keeps a batch norm's
// num_batches_tracked as an int64 scalar, DeepCAM's image-pool affine is `weights` [C, 1, 1].
struct ExternalParam {
  std::string key;
  std::vector<int64_t> shape;  // empty: a scalar; numel equals the crest parameter's
  DType dtype = DType::f32;    // i64: an integer counter (crest stores it as a float)
};

struct BuiltModel {
  Graph graph;
  ValueId prediction = -1;  // what the task's metrics compare with the target
  ValueId loss = -1;        // the scalar that training minimises
  // The graph inputs fed from each batch: the samples' data and their targets.
  std::string sample_input = "x";
  std::string target_input = "y";
  // Parameter name -> its name, shape and type in interchange files, where they differ.
  std::map<std::string, ExternalParam> external_params;
};

// PyTorch keeps each batch norm's num_batches_tracked as an int64 scalar: the external name of
// every batch-norm node's counter in `g`, for a model whose names are a PyTorch module's.
std::map<std::string, ExternalParam> torch_batch_norm_counters(const Graph& g);

}  // namespace crest
