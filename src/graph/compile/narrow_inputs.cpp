// Mixed precision with CompileOptions::half_inputs: a float graph input whose every reader
// computes in the 16-bit type is stored in that type. Without this pass such an input is float32
// and create_kernels converts it with a reorder, so the batch lives in the arena twice (CosmoFlow
// 128^3 batch 2: 64 MiB float32 beside its 32 MiB bf16 copy, pinned for the whole step and thus
// part of the peak at conv1's backward). The caller narrows while it writes the input instead,
// rounding to nearest even as the reorder did.
#include <algorithm>

#include "compile/program.hpp"

namespace crest::compile {
namespace {

// The 16-bit type every reader of graph value v computes in; nothing when a reader is float (a
// loss reading a target), when nothing reads v, or when the readers differ.
std::optional<DType> readers_half_type(const Program& p, ValueId v) {
  std::optional<DType> type;
  for (const Node& node : p.nodes) {
    if (std::find(node.inputs.begin(), node.inputs.end(), v) == node.inputs.end()) continue;
    if (!is_half(node.dtype) || (type && *type != node.dtype)) return std::nullopt;
    type = node.dtype;
  }
  return type;
}

}  // namespace

void narrow_inputs(Program& p, const Graph& g) {
  if (!p.opts.half || !p.opts.half_inputs) return;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const auto v = static_cast<ValueId>(i);
    Value& x = p.val(v);
    const auto& outputs = g.outputs();
    // A caller reads marked outputs as float; an input gradient keeps its input's dtype.
    if (!is_floating(x.fmt.dtype) || x.needs_grad ||
        std::find(outputs.begin(), outputs.end(), v) != outputs.end())
      continue;
    if (const std::optional<DType> half = readers_half_type(p, v))
      x.fmt = plain_format(x.shape, *half, x.fmt.layout);
  }
}

}  // namespace crest::compile
