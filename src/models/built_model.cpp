#include "crest/models/built_model.hpp"

namespace crest {

std::map<std::string, ExternalParam> torch_batch_norm_counters(const Graph& g) {
  std::map<std::string, ExternalParam> names;
  for (const GraphNode& n : g.nodes())
    if (n.layer.kind == "batch_norm") {
      const std::string counter = n.name + ".num_batches_tracked";
      names[counter] = {counter, {}, DType::i64};
    }
  return names;
}

}  // namespace crest
