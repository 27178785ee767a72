// A training run's checkpoint metadata (crest/train/checkpoint.hpp) read back from a verified
// checkpoint file. Private to src/train.
#pragma once
#include "crest/data/safetensors.hpp"
#include "crest/train/checkpoint.hpp"

namespace crest {

// The metadata's fields (position, history, run shape), each checked to parse; errors (input)
// name the file and the field.
CheckpointInfo checkpoint_info_of(const SafetensorsFile& file);

}  // namespace crest
