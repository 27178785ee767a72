// Weights interchange with PyTorch and other tools: a model's trainable parameters as a
// safetensors file, one tensor per parameter under its crest name (docs/weights.md).
#pragma once
#include <map>
#include <string>

#include "crest/graph/param_store.hpp"

namespace crest {

// Loads every parameter of `params` from `path`. The file must hold exactly the model's
// parameters with the same shapes (F32 or F64; converted to the store's dtype). Anything
// missing, extra or of another shape is an error (input) naming the file and the tensor;
// `params` is unchanged unless the whole file is valid.
void load_weights(ParamStore& params, const std::string& path);

// Writes every parameter to `path` atomically (temp file, fsync, rename).
void save_weights(const ParamStore& params, const std::string& path,
                  const std::map<std::string, std::string>& metadata = {});

}  // namespace crest
