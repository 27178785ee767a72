// crest export: a trained model for other tools, as an ONNX model or a safetensors weights file
// (docs/export.md). The command line (src/tools/export_command.cpp) only fills ExportRequest.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "crest/train/config.hpp"

namespace crest {

enum class ExportFormat { onnx, safetensors };

struct ExportRequest {
  // The weights: exactly one of a checkpoint (a run's output_dir or a checkpoint file), a
  // weights file, or the model's initial weights from a seed (to try the pipeline untrained).
  std::string checkpoint;
  std::string weights;
  std::optional<uint64_t> init_seed;
  std::string out;
  ExportFormat format = ExportFormat::onnx;
  int64_t batch = 0;  // ONNX: > 0 fixes the batch dimension; 0 is the symbolic "N"
  bool overwrite = false;
  // Also run crest's inference executor on check_with (.npy, float32, batch-first, the input's
  // layout as the data files hold it) and write its prediction to check_out (.npy, float32,
  // [N, C, ...]): what the exported model must reproduce.
  std::string check_with;
  std::string check_out;
};

// Refuses an output path before any work: an existing file without `overwrite` (usage), or a
// directory that does not exist or cannot be written (input). `option` names the flag.
void check_output_path(const std::string& path, bool overwrite, const std::string& option);

// Loads the model `config` describes with the requested weights and writes request.out (and
// request.check_out). Returns a one-line summary for the log.
std::string export_model(const Config& config, const ExportRequest& request);

}  // namespace crest
