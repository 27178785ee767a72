// The part of a model that inference runs: the sample input and the nodes the prediction depends
// on, without the loss and the target input (crest export, crest export --check-with).
#pragma once
#include <string>

#include "crest/graph/graph.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

// A graph with one input (model.sample_input) and the prediction as its only output. Node names
// (and so parameter names) are the model's. Throws crest::Error (input) when the prediction
// depends on the target input, naming the node that reads it.
Graph inference_graph(const BuiltModel& model);

// What the exported prediction is called: "logits" when the model's loss reads it as class
// scores (softmax_cross_entropy), else "y".
std::string prediction_name(const BuiltModel& model);

}  // namespace crest
