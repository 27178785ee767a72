// What building a model gives the trainer: the network and the roles of its values. Whatever
// made it (a registered C++ model or a YAML graph), the trainer reads only this.
#pragma once
#include <string>

#include "crest/graph/graph.hpp"

namespace crest {

struct BuiltModel {
  Graph graph;
  ValueId prediction = -1;  // what the task's metrics compare with the target
  ValueId loss = -1;        // the scalar that training minimises
  // The graph inputs fed from each batch: the samples' data and their targets.
  std::string sample_input = "x";
  std::string target_input = "y";
};

}  // namespace crest
