// A trained model's weights for inference (crest export, crest predict): from a training run's
// checkpoint or from a weights file. Only the model's parameters and batch-norm state are read;
// a checkpoint's optimizer state is ignored (docs/export.md "Weights").
#pragma once
#include <string>

#include "crest/engine/weights.hpp"
#include "crest/graph/param_store.hpp"

namespace crest {

// The checkpoint file `checkpoint` names: a file is that checkpoint; a directory is a run's
// output_dir, whose newest checkpoint under DIR/checkpoints is taken. Throws crest::Error (input)
// naming the path when there is none.
std::string resolve_checkpoint(const std::string& checkpoint);

// Loads every parameter of `params` from the checkpoint file `path` (its model/<param> tensors,
// F32 or F64, converted to the store's dtype), after verifying the file's checksum and every
// tensor. A missing, misshapen or foreign model tensor is an error (input) naming the file and
// the tensor; `params` is unchanged then.
void load_checkpoint_weights(ParamStore& params, const std::string& path);

// Exactly one of `checkpoint` (resolve_checkpoint) and `weights` (a safetensors file as
// `crest train --save-weights` writes it, under the model's external `names`) must be given,
// else crest::Error (usage) naming --checkpoint and --weights.
void load_trained_weights(ParamStore& params, const ExternalNames& names,
                          const std::string& checkpoint, const std::string& weights);

}  // namespace crest
