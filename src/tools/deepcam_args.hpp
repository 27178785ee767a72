// The DeepCAM reference's train.py command line (mlcommons/hpc deepcam/src/deepCam/utils/
// parser.py), read the way its argparse parser reads it, and rendered as the equivalent crest run
// config: `crest config from-args deepcam -- ARGS` (config_command.cpp).
//
// Every one of the reference's 25 arguments is known with its default, so an argument left out
// becomes the reference's value and the YAML describes the whole reference run. `--adam_eps` is
// accepted too: the reference's example scripts pass it although its parser rejects it.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace crest::tools {

// --lr_schedule "type=multistep,milestones=800 1600,decay_rate=0.1" or
// "type=cosine_annealing,t_max=N[,eta_min=x]" (the reference's StoreDictKeyPair: comma-separated
// key=value pairs, values strings it converts later).
struct DeepcamLrScheduleArg {
  std::string type;                 // "multistep" or "cosine_annealing"
  std::vector<int64_t> milestones;  // multistep: whitespace-separated in the value
  double decay_rate = 0;            // multistep
  int64_t t_max = 0;                // cosine_annealing
  double eta_min = 0;               // cosine_annealing; 0 when left out, as the reference
  std::string text;                 // the argument as given, for the YAML's comment
};

// The reference's arguments, each initialised to its parser default.
struct DeepcamArgs {
  std::string wireup_method = "nccl-openmpi";
  std::string wandb_certdir = "/opt/certs";
  std::optional<std::string> run_tag;
  std::optional<std::string> output_dir;
  std::optional<std::string> checkpoint;
  std::string data_dir_prefix = "/";
  int64_t max_inter_threads = 1;
  int64_t max_epochs = 30;
  int64_t save_frequency = 0;  // epochs; 0 = never
  int64_t gradient_accumulation_frequency = 1;
  int64_t logging_frequency = 0;  // steps; <= 0 = once per epoch
  int64_t local_batch_size = 1;
  std::vector<int64_t> channels{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  std::string optimizer = "Adam";  // Adam, AdamW or LAMB
  double start_lr = 1e-3;
  std::vector<double> optimizer_betas{0.9, 0.999};
  double weight_decay = 1e-6;
  int64_t lr_warmup_steps = 0;
  double lr_warmup_factor = 1.0;
  std::optional<DeepcamLrScheduleArg> lr_schedule;  // none: constant start_lr
  double target_iou = 0.82;
  std::string model_prefix = "model";
  int64_t batchnorm_group_size = 1;
  bool resume_logging = false;
  int64_t seed = 333;
  // Not a reference argument (its parser rejects it; its optimizers use 1e-6 regardless), but
  // passed by its example scripts (run_scripts/run_training.sh).
  std::optional<double> adam_eps;

  std::set<std::string> given;  // the arguments the command line set (without "--")
};

// Reads train.py's arguments: `--name value` or `--name=value`, a unique prefix of a name (as
// argparse allows), one or more values after --channels, two after --optimizer_betas (after
// `--name=value` the following values continue the list), the flag --resume_logging; a later
// repetition wins. Throws a usage crest::Error naming the argument for an unknown or ambiguous
// argument, a missing or malformed value, a value outside the reference's choices, or a malformed
// --lr_schedule.
DeepcamArgs parse_deepcam_args(const std::vector<std::string>& argv);

// The crest run config (YAML, the schema of docs/configs.md) that trains what the reference run
// with `args` trains, every value commented with the argument it comes from; arguments with no
// crest setting become comments saying what crest does instead. `argv` is echoed in the header.
std::string deepcam_args_to_yaml(const DeepcamArgs& args, const std::vector<std::string>& argv);

}  // namespace crest::tools
