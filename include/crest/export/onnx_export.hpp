// ONNX export of a model's inference graph (docs/export.md): opset 17, one input `x` in the data
// files' channels-last layout, one output (prediction_name: `y` or `logits`) in crest's logical
// layout [N, C, ...], the parameters as float32 initializers. Built with Debian's libonnx
// (generated protobuf classes and its checker); a build without ONNX keeps the declarations and
// throws.
#pragma once
#include <cstdint>
#include <string>

#include "crest/graph/param_store.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

struct OnnxExportOptions {
  int64_t batch = 0;  // > 0: a fixed batch; 0: the symbolic dimension "N"
};

// Throws crest::Error (usage) saying why when this build cannot write ONNX (CMake did not find
// ONNX): for commands that must refuse before any work.
void require_onnx_export();

// Whether the export maps layer kind `kind` to ONNX (false for the losses, which inference does
// not run, and for every kind in a build without ONNX).
bool onnx_exports_kind(const std::string& kind);

// The ONNX model of `model`'s prediction with the values in `params` (float32, named as the
// model names them), checked by onnx::checker::check_model, serialised. A node kind without an
// ONNX mapping is an error (input) naming the node and the kind; a model the checker rejects is
// an internal error naming the checker's complaint. Without ONNX: crest::Error (usage) saying so.
std::string export_onnx(const BuiltModel& model, const ParamStore& params,
                        const OnnxExportOptions& options);

}  // namespace crest
