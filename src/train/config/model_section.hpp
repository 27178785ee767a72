// model: a registered model (its keys are the model's own, crest/models/model_registry.hpp) or a
// network given as a graph (`layers:`, docs/models.md).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "config/reader.hpp"
#include "crest/train/config.hpp"

namespace crest::config {

// A value the task gives a model key (model.input_shape is data.sample_shape): set before the
// model's checks, and a problem with it is reported where it came from.
struct TaskValue {
  AttrValue value;
  std::function<void(const std::string& message)> fail;  // throws
};

ModelConfig read_model_section(const Source& src, const Section& section,
                               const std::map<std::string, TaskValue>& task);
// "\nmodel:\n  name: ...\n..."
std::string print_model_section(const ModelConfig& m);

}  // namespace crest::config
