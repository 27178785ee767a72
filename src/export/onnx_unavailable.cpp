// Built instead of src/export/onnx/ when CMake did not find ONNX: the export says what is missing.
#include "crest/core/error.hpp"
#include "crest/export/onnx_export.hpp"

namespace crest {

void require_onnx_export() {
  throw_usage(
      "this crest was built without ONNX (CMake did not find it: on Debian install libonnx-dev "
      "and libprotobuf-dev and rebuild); --format safetensors works without it");
}

bool onnx_exports_kind(const std::string& /*kind*/) { return false; }

std::string export_onnx(const BuiltModel&, const ParamStore&, const OnnxExportOptions&) {
  require_onnx_export();
  return {};  // not reached: require_onnx_export throws here
}

}  // namespace crest
