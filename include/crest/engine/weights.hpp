// Weights interchange with PyTorch and other tools: a model's parameters and non-trained state
// (batch-norm statistics) as a safetensors file, one tensor per parameter under its crest name
// or, where the model says so, its reference framework's key (docs/weights.md).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crest/data/safetensors.hpp"
#include "crest/engine/checkpoint_file.hpp"
#include "crest/engine/whole_parts.hpp"
#include "crest/graph/param_store.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

// crest parameter name -> its key, shape and type in the file (BuiltModel::external_params).
using ExternalNames = std::map<std::string, ExternalParam>;

// Loads every parameter of `params` from `path`. The file must hold exactly the model's
// parameters with the same shapes (F32 or F64 values, converted to the store's dtype; I64, F32 or
// F64 for integer counters). Keys may all carry the "module." prefix of a PyTorch
// DistributedDataParallel state_dict. Anything missing, extra or of another shape is an error
// (input) naming the file and the tensor; `params` is unchanged unless the whole file is valid.
void load_weights(ParamStore& params, const std::string& path, const ExternalNames& names = {});

// The same into `part`, a pipeline stage's parameters (named as the whole model's), from a whole
// model's file: the file must hold exactly `whole`'s parameters, checked as above before any is
// stored; only `part`'s are read. `whole` is a layout (it may have no buffers), so a rank that
// holds one stage never holds the whole model.
void load_weights_part(ParamStore& part, const ParamStore& whole, const std::string& path,
                       const ExternalNames& names = {});

// The same from tensors in memory (crest's Python module: a state_dict of arrays); `source` names
// where they came from in errors, as load_weights names the file. Every key must be a parameter's
// (no "module." prefix here).
void load_weight_tensors(ParamStore& params, const std::vector<SafetensorsTensor>& tensors,
                         const std::string& source, const ExternalNames& names = {});

// Writes every parameter's values from its tensor (F32, F64 or I64 values, converted to the
// store's dtype; `tensor_of` has checked names and shapes) into the store, through host staging.
void store_tensors(ParamStore& params,
                   const std::function<const SafetensorsTensor&(const ParamSlot&)>& tensor_of);

// Every parameter as a tensor under its external name where `names` gives one (what save_weights
// writes), in host memory the result keeps alive: the store's dtype (on a host backend, the
// store's own values: read them before the next update), or int64 copies for the counters.
struct WeightTensors {
  std::vector<SafetensorsEntry> entries;
  std::shared_ptr<const void> host_values;           // the store's values in host memory
  std::vector<std::unique_ptr<int64_t[]>> counters;  // int64 copies of the counters
};
// Divided parameters (a spatially split dense head) come whole from `wholes`.
WeightTensors weight_tensors(const ParamStore& params, const ExternalNames& names = {},
                             const WholeParts& wholes = {});

// Writes every parameter to `path` atomically (temp file, fsync, rename), under the external
// names where `names` gives them.
void save_weights(const ParamStore& params, const std::string& path,
                  const std::map<std::string, std::string>& metadata = {},
                  const ExternalNames& names = {}, const WholeParts& wholes = {});
// The same for a model laid out as `layout` (its buffers need not exist here), asking `bytes` for
// each parameter's values (state "") as the file takes them: a pipeline's stages send theirs to
// the writer in turn (SavedState::provide).
void save_weights(const ParamStore& layout, const std::string& path,
                  const std::map<std::string, std::string>& metadata, const ExternalNames& names,
                  const checkpoint_file::StateBytes& bytes);

}  // namespace crest
