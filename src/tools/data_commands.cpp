// The data tools: crest datagen | stage | validate | inspect.
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/core/name_registry.hpp"
#include "crest/data/data_family.hpp"
#include "crest/data/datagen.hpp"
#include "crest/data/formats/inspect.hpp"
#include "crest/data/staging.hpp"
#include "crest/data/validate.hpp"
#include "crest/dist/communicator.hpp"

namespace crest::tools {
namespace {

Shape parse_shape(const std::string& text, const std::string& option) {
  std::vector<int64_t> dims;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(part, &used);
      if (used != part.size() || v < 1) throw std::invalid_argument(part);
      dims.push_back(v);
    } catch (const std::exception&) {
      throw_usage(option + ": '" + text +
                  "' is not a comma-separated list of positive sizes (e.g. 128,128,128,4)");
    }
  }
  if (dims.empty() || dims.size() > 8)
    throw_usage(option + ": expected 1 to 8 sizes, got '" + text + "'");
  return Shape(dims);
}

// "cosmoflow: CosmoFlow 3-D volumes (...); deepcam: ...", for the help.
std::string family_help() {
  std::string out;
  for (const auto& name : data_family_names())
    out += (out.empty() ? "" : "; ") + name + ": " + find_data_family(name).description;
  return out;
}

// "cosmoflow: tfrecord (default) or npy; deepcam: hdf5 (default) or npy", for the help.
std::string format_help() {
  std::string out;
  for (const auto& name : data_family_names()) {
    const auto& formats = find_data_family(name).formats;
    out += (out.empty() ? "" : "; ") + name + ":";
    for (size_t i = 0; i < formats.size(); ++i)
      out += (i == 0                    ? " "
              : i + 1 == formats.size() ? " or "
                                        : ", ") +
             formats[i] + (i == 0 ? " (default)" : "");
  }
  return out;
}

void register_datagen(CLI::App& app) {
  auto o = std::make_shared<DatagenOptions>();
  CLI::App* cmd =
      app.add_subcommand("datagen", "write a learnable synthetic dataset in its reference formats");
  cmd->add_option("kind", o->family, family_help())
      ->required()
      ->check(CLI::IsMember(data_family_names()));
  cmd->add_option("--out,-o", o->out,
                  "output directory (train/, validation/ and, for deepcam, stats.h5)")
      ->required();
  cmd->add_option("--train", o->n_train, "training samples")->required();
  cmd->add_option("--valid", o->n_valid, "validation samples")->required();
  cmd->add_option(
      "--size", o->size,
      "cosmoflow: cube edge, a multiple of 32; imagenet: images' typical side (default 128)");
  cmd->add_option("--height", o->height, "deepcam: rows, a multiple of 16 (default 768)");
  cmd->add_option("--width", o->width, "deepcam: columns, a multiple of 16 (default 1152)");
  cmd->add_option("--format", o->format, format_help());
  cmd->add_flag("--gzip", o->gzip,
                "cosmoflow: GZIP-compressed TFRecords, as the MLPerf v1.0+ data");
  cmd->add_flag("--fused", o->fused,
                "deepcam npy: NVIDIA's fused datalabel-*.npy (label as the last channel) instead "
                "of data-*.npy + label-*.npy");
  cmd->add_option("--seed", o->seed, "random seed (default 0)");
  cmd->add_option("--threads", o->threads, "files generated in parallel (default: all cores)");
  cmd->add_flag("--overwrite", o->overwrite, "replace existing files in the output directory");
  cmd->callback([o] { generate_dataset(*o, std::cout); });
}

void register_stage(CLI::App& app) {
  auto o = std::make_shared<StageOptions>();
  CLI::App* cmd = app.add_subcommand(
      "stage",
      "copy a dataset to node-local storage, verified (under mpirun: each file read once per job)");
  cmd->add_option("--from", o->from, "dataset directory on the shared file system")->required();
  cmd->add_option("--to", o->to, "node-local destination directory")->required();
  cmd->add_flag("--inflate", o->inflate,
                "inflate GZIP TFRecords to plain ones (more disk, less CPU per epoch)");
  cmd->add_flag("--overwrite", o->overwrite, "replace files already in the destination");
  cmd->add_option("--threads", o->threads, "files copied in parallel (default 4)");
  cmd->callback([o] {
    auto comm = make_world_communicator(WorldOptions{});
    std::ostream discard(nullptr);
    stage_dataset(*o, *comm, comm->rank() == 0 ? std::cout : discard);  // rank 0 reports
  });
}

void register_validate(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  auto shape = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("validate", "check every sample file of a dataset; list each bad file");
  cmd->add_option("dir", o->dir, "dataset root (with train/, validation/) or one split directory")
      ->required();
  cmd->add_option("--sample-shape", *shape,
                  "expected sample shape, e.g. 128,128,128,4 (default: the majority)");
  cmd->add_option("--format", o->format,
                  join_names(data_family_names()) + " (default: from the file names)");
  cmd->add_option("--targets", o->targets, "cosmoflow: target values per sample (default 4)");
  cmd->add_option("--threads", o->threads, "files checked in parallel (default: all cores)");
  cmd->callback([o, shape] {
    if (!shape->empty()) o->sample_shape = parse_shape(*shape, "--sample-shape");
    const ValidateReport r = validate_dataset(*o, std::cout);
    if (!r.ok())
      throw_input(o->dir + ": " + std::to_string(r.errors.size()) + " of " +
                  std::to_string(r.files) + " files are bad (listed above)");
  });
}

void register_inspect(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("inspect", "show what one file holds (TFRecord, HDF5, npy, safetensors)");
  cmd->add_option("file", *file, "the file")->required();
  cmd->callback([file] { std::cout << inspect_file(*file); });
}

}  // namespace

void register_data_tools(CLI::App& app) {
  register_datagen(app);
  register_stage(app);
  register_validate(app);
  register_inspect(app);
}

}  // namespace crest::tools
