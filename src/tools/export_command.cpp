// crest export --config FILE [key.path=value ...] (--checkpoint DIR_OR_FILE | --weights F |
//              --init-seed S) --out PATH [--format onnx|safetensors] [--batch N|dynamic]
//              [--precision float32] [--overwrite] [--check-with IN.npy --check-out OUT.npy]
// (docs/export.md)
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/export/export_model.hpp"
#include "crest/train/config.hpp"

namespace crest::tools {
namespace {

ExportFormat parse_format(const std::string& f) {
  if (f == "onnx") return ExportFormat::onnx;
  if (f == "safetensors") return ExportFormat::safetensors;
  throw_usage("--format must be onnx or safetensors, not '" + f + "'");
}

int64_t parse_batch(const std::string& b) {
  if (b == "dynamic") return 0;
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(b, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != b.size() || n < 1)
    throw_usage("--batch must be a positive number or 'dynamic', not '" + b + "'");
  return n;
}

// ONNX Runtime's CPU kernels have little bf16 support, and the exported model is verified in
// float32 only, so bf16 is refused rather than written unverified.
void check_precision(const std::string& p) {
  if (p == "float32" || p == "fp32") return;
  if (p == "bf16")
    throw_usage("--precision bf16 is not supported yet: crest export writes float32 models");
  throw_usage("--precision must be float32, not '" + p + "'");
}

}  // namespace

void register_export(CLI::App& app) {
  struct Args {
    std::string config, format = "onnx", batch = "dynamic", precision = "float32";
    std::vector<std::string> overrides;
    uint64_t init_seed = 0;
    ExportRequest request;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "export", "write a trained model as an ONNX model or a safetensors weights file");
  cmd->add_option("--config,-c", args->config, "the model's config (its model: section)")
      ->required();
  cmd->add_option("overrides", args->overrides, "key.path=value overrides, e.g. model.conv_size=8");
  cmd->add_option(
      "--checkpoint", args->request.checkpoint,
      "weights from a checkpoint: a run's output_dir (its newest) or a checkpoint file");
  cmd->add_option("--weights", args->request.weights,
                  "weights from a safetensors file (crest train --save-weights)");
  CLI::Option* seed = cmd->add_option(
      "--init-seed", args->init_seed,
      "no trained weights: the model's initial weights from this seed (to try the pipeline)");
  cmd->add_option("--out,-o", args->request.out, "the file to write")->required();
  cmd->add_option("--format", args->format, "onnx (default) or safetensors");
  cmd->add_option("--batch", args->batch, "ONNX batch dimension: N, or dynamic (default)");
  cmd->add_option("--precision", args->precision, "float32 (default; bf16 is not supported yet)");
  cmd->add_flag("--overwrite", args->request.overwrite, "replace existing output files");
  cmd->add_option("--check-with", args->request.check_with,
                  "also run crest's inference on this float32 .npy [N, input dims as in the "
                  "data files]...");
  cmd->add_option("--check-out", args->request.check_out,
                  "...and write crest's prediction [N, C, ...] to this .npy");
  cmd->callback([args, seed] {
    for (const auto& o : args->overrides)
      if (o.find('=') == std::string::npos)
        throw_usage("'" + o + "' is neither an option nor a key.path=value override");
    ExportRequest r = args->request;
    r.format = parse_format(args->format);
    r.batch = parse_batch(args->batch);
    check_precision(args->precision);
    if (seed->count() > 0) r.init_seed = args->init_seed;
    const Config config = load_config(args->config, args->overrides);
    std::cout << export_model(config, r) << "\n";
  });
}

}  // namespace crest::tools
