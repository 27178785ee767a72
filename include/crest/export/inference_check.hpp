// crest export --check-with IN.npy --check-out OUT.npy: crest's own inference prediction on given
// inputs, the values an exported model must reproduce (tests/interop/onnx_interop.py compares
// ONNX Runtime's with them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "crest/graph/executor.hpp"
#include "crest/graph/graph.hpp"

namespace crest {

struct CheckInput {
  std::string name;  // the graph input it feeds
  int64_t batch = 0;
  std::vector<float> values;  // in the input's declared layout (channels-last for the data)
};

// Reads a float32 .npy of shape [N, ...] where ... is `x`'s per-sample shape in its declared
// layout ([D, H, W, C] for a channels-last [C, D, H, W]). Errors name the file and the shapes.
CheckInput read_check_input(const std::string& path, const GraphInput& x);

// Runs `ex` (compiled from `graph` for in.batch, training off) on `in` and writes the graph's
// output to `out` as float32 [N, C, ...] (crest's logical layout, whatever the executor's).
void run_inference_check(Executor& ex, const Graph& graph, const CheckInput& in,
                         const std::string& out);

}  // namespace crest
