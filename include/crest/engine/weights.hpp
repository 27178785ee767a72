// Weights interchange with PyTorch and other tools: a model's parameters and non-trained state
// (batch-norm statistics) as a safetensors file, one tensor per parameter under its crest name
// or, where the model says so, its reference framework's key (docs/weights.md).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "crest/data/safetensors.hpp"
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

// Writes every parameter's values from its tensor (F32, F64 or I64 values, converted to the
// store's dtype; `tensor_of` has checked names and shapes) into the store, through host staging.
void store_tensors(ParamStore& params,
                   const std::function<const SafetensorsTensor&(const ParamSlot&)>& tensor_of);

// Writes every parameter to `path` atomically (temp file, fsync, rename), under the external
// names where `names` gives them.
void save_weights(const ParamStore& params, const std::string& path,
                  const std::map<std::string, std::string>& metadata = {},
                  const ExternalNames& names = {});

}  // namespace crest
