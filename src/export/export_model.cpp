#include "crest/export/export_model.hpp"

#include <unistd.h>

#include <filesystem>

#include "crest/backends/kernels.hpp"
#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/engine/session.hpp"
#include "crest/engine/trained_weights.hpp"
#include "crest/export/inference_check.hpp"
#include "crest/export/inference_graph.hpp"
#include "crest/export/onnx_export.hpp"
#include "crest/graph/executor.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace fs = std::filesystem;

namespace {

// Everything about the request that needs no file read: refused before any work.
void check_request(const ExportRequest& r) {
  const int given = !r.checkpoint.empty() + !r.weights.empty() + r.init_seed.has_value();
  if (given != 1)
    throw_usage(
        "give the weights as exactly one of --checkpoint DIR_OR_FILE, --weights FILE "
        "and --init-seed SEED");
  if (r.check_with.empty() != r.check_out.empty())
    throw_usage("--check-with and --check-out go together");
  if (r.batch < 0) throw_usage("--batch must be positive or dynamic");
  if (r.format == ExportFormat::onnx) require_onnx_export();
  check_output_path(r.out, r.overwrite, "--out");
  if (!r.check_out.empty()) check_output_path(r.check_out, r.overwrite, "--check-out");
}

}  // namespace

void check_output_path(const std::string& path, bool overwrite, const std::string& option) {
  if (path.empty()) throw_usage(option + " is required");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw_input(option + " " + path + " is a directory");
  if (fs::exists(path, ec) && !overwrite)
    throw_usage(option + " " + path + " exists; pass --overwrite to replace it");
  const fs::path parent =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec))
    throw_input(option + " " + path + ": the directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    throw_input(option + " " + path + ": the directory " + parent.string() + " is not writable");
}

std::string export_model(const Config& config, const ExportRequest& r) {
  check_request(r);  // nothing slow before the request is known to be possible

  const BuiltModel model = build_model(config.model);
  const Graph graph = inference_graph(model);
  const std::optional<CheckInput> check =
      r.check_with.empty() ? std::nullopt
                           : std::optional(read_check_input(r.check_with, graph.inputs().at(0)));
  SessionOptions so;
  so.backend = config.crest.backend;
  so.threads = config.crest.threads;
  so.purpose = Purpose::weights;
  so.batch = check ? check->batch : 1;
  so.seed = r.init_seed.value_or(0);
  const Session session(graph, so);
  Executor& ex = session.executor();
  if (!r.init_seed)  // else the executor initialised them from the seed
    load_trained_weights(ex.params(), model.external_params, r.checkpoint, r.weights);

  std::string what;
  if (r.format == ExportFormat::onnx) {
    write_file_atomically(r.out, export_onnx(model, ex.params(), {r.batch}));
    what = "ONNX model (opset 17, input " + model.sample_input + ", output " +
           prediction_name(model) + ")";
  } else {
    save_weights(
        ex.params(), r.out,
        {{"format", "crest weights"}, {"model", config.model.name}, {"config", config.source}},
        model.external_params);
    what = "weights";
  }
  std::string summary = "exported the " + what + " to " + r.out;
  if (check) {
    run_inference_check(ex, graph, *check, r.check_out);
    summary += "; crest's prediction on " + r.check_with + " written to " + r.check_out;
  }
  return summary;
}

}  // namespace crest
