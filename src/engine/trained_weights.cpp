#include "crest/engine/trained_weights.hpp"

#include <filesystem>

#include "crest/core/error.hpp"
#include "crest/engine/checkpoint_file.hpp"

namespace crest {
namespace fs = std::filesystem;

std::string resolve_checkpoint(const std::string& checkpoint) {
  std::error_code ec;
  if (!fs::is_directory(checkpoint, ec)) {
    if (!fs::exists(checkpoint, ec)) throw_input(checkpoint + ": no such checkpoint file");
    return checkpoint;
  }
  const std::string dir = (fs::path(checkpoint) / "checkpoints").string();
  const auto found = checkpoint_file::list(dir);
  if (found.empty())
    throw_input(checkpoint + ": no checkpoint under " + dir +
                " (--checkpoint takes a run's output_dir or a checkpoint file)");
  return found.back();
}

void load_checkpoint_weights(ParamStore& params, const std::string& path) {
  checkpoint_file::load_parameters(checkpoint_file::open_verified(path), params);
}

void load_trained_weights(ParamStore& params, const ExternalNames& names,
                          const std::string& checkpoint, const std::string& weights) {
  if (checkpoint.empty() == weights.empty())
    throw_usage(
        "give the trained weights as exactly one of --checkpoint DIR_OR_FILE and "
        "--weights FILE");
  if (!weights.empty())
    load_weights(params, weights, names);
  else
    load_checkpoint_weights(params, resolve_checkpoint(checkpoint));
}

}  // namespace crest
