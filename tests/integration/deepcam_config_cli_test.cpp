// configs/deepcam.yaml and `crest config from-args deepcam`: the reference's closed-division run as
// a crest config, and a reference train.py command line converted into one that loads with the
// same values, the reference's defaults for what it leaves out, and exit code 2 naming the
// argument for what the reference would not accept.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"
#include "crest/train/trainer.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"
#include "tools/deepcam_args.hpp"

namespace crest {
namespace {

using test::CliRun;
using test::TempDir;

const std::vector<int64_t> kAllChannels{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// The reference's example script (run_scripts/run_training.sh) with its placeholders filled in
// (and --max_epochs 35), as a shell would pass them: the quotes of --lr_schedule are the shell's.
const std::string kExampleArgs =
    "--wireup_method \"dummy\" --run_tag test_run --data_dir_prefix /data/deepcam "
    "--output_dir /tmp/out --model_prefix \"segmentation\" --optimizer \"LAMB\" --adam_eps 1e-6 "
    "--local_batch_size 2 --start_lr 0.0055 "
    "--lr_schedule type=\"multistep\",milestones=\"800\",decay_rate=\"0.1\" "
    "--lr_warmup_steps 400 --lr_warmup_factor 1. --weight_decay 1e-2 --logging_frequency 10 "
    "--save_frequency 0 --max_epochs 35 --max_inter_threads 4 --seed 1234 "
    "--batchnorm_group_size 1 --target_iou 0.82";

// `crest config from-args deepcam -- ARGS` with stdout alone in `yaml_file` (stderr in out).
CliRun from_args(const std::string& args, const std::string& yaml_file) {
  return test::run_shell(std::string(CREST_BINARY) + " config from-args deepcam -- " + args +
                         " 2>&1 >" + yaml_file);
}

// Converts through the binary and loads the printed YAML with the config loader.
Config converted(const std::string& args) {
  TempDir d;
  const std::string yaml = d.file("run.yaml");
  const CliRun r = from_args(args, yaml);
  EXPECT_EQ(r.code, 0) << r.out;
  return load_config(yaml);
}

// The closed-division settings both the config file and the example script give.
void expect_closed_division_run(const Config& c) {
  EXPECT_EQ(c.data.name, "deepcam");
  EXPECT_EQ(c.data.format, SampleFileFormat::hdf5);
  EXPECT_EQ(c.data.sample_shape, (Shape{768, 1152, 16}));
  EXPECT_EQ(c.data.channels, kAllChannels);
  EXPECT_EQ(c.data.batch_size, 2);
  EXPECT_EQ(c.data.train_order, TrainOrder::reference);  // the reference's per-rank sequence
  EXPECT_TRUE(c.data.shuffle);
  EXPECT_EQ(c.model.name, "deepcam");
  EXPECT_EQ(c.optimizer.name, "LAMB");
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.999);
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(c.optimizer.max_grad_norm, 1.0);
  EXPECT_TRUE(c.lr_schedule.per_step);
  EXPECT_DOUBLE_EQ(c.lr_schedule.start_lr, 0.0055);
  EXPECT_EQ(c.lr_schedule.type, "multistep");
  EXPECT_EQ(c.lr_schedule.milestones, std::vector<int64_t>{800});
  EXPECT_DOUBLE_EQ(c.lr_schedule.decay_rate, 0.1);
  EXPECT_EQ(c.lr_schedule.lr_warmup_steps, 400);
  EXPECT_DOUBLE_EQ(c.lr_schedule.lr_warmup_factor, 1.0);
  EXPECT_FALSE(c.lr_schedule.closed_form);
  // The reference's own rates for this schedule (reference/DEEPCAM.md "LR schedule semantics").
  const StepLrSchedule s = step_lr_schedule_of(c.lr_schedule);
  EXPECT_DOUBLE_EQ(s.lr(0), 1.375e-5);
  EXPECT_DOUBLE_EQ(s.lr(398), 0.00548625);
  EXPECT_DOUBLE_EQ(s.lr(1199), 0.00548625);
  EXPECT_DOUBLE_EQ(s.lr(1200), 0.000548625);
  EXPECT_EQ(c.train.metrics, std::vector<std::string>{"iou"});
  ASSERT_TRUE(c.train.target_iou.has_value());
  EXPECT_DOUBLE_EQ(*c.train.target_iou, 0.82);
  EXPECT_FALSE(c.train.target_mae.has_value());
  EXPECT_EQ(c.train.gradient_accumulation_frequency, 1);
  EXPECT_EQ(c.dist.batchnorm_group_size, 1);
  EXPECT_EQ(c.mlperf.division, "closed");
  EXPECT_EQ(c.mlperf.status, "onprem");
  EXPECT_EQ(c.mlperf.platform, "SUBMISSION_PLATFORM_PLACEHOLDER");
}

TEST(DeepcamConfigFile, LoadsWithTheReferenceClosedDivisionValues) {
  const Config c = load_config(test::source_path("configs/deepcam.yaml"));
  expect_closed_division_run(c);
  EXPECT_EQ(c.data.data_dir, "/path/to/deepcam");
  EXPECT_EQ(c.data.n_epochs, 200);  // run_training.sh's --max_epochs
  EXPECT_EQ(c.data.seed, 333u);     // the parser's --seed default
  EXPECT_EQ(c.data.n_train, kEverySample);
  EXPECT_EQ(c.data.n_valid, kEverySample);
  EXPECT_EQ(c.train.checkpoint_every, 0);  // --save_frequency 0: only at the end
  EXPECT_EQ(c.output_dir, "results/deepcam");
}

// The file reaches the data check, and with small data prints the reference network's size.
TEST(DeepcamConfigFile, DryRunBuildsTheReferenceNetwork) {
  const std::string config = test::source_path("configs/deepcam.yaml");
  TempDir d;
  const CliRun gen = test::run_crest("datagen deepcam --out " + d.file("cam") +
                                     " --train 2 --valid 1 --height 32 --width 48 --threads 1");
  ASSERT_EQ(gen.code, 0) << gen.out;
  const CliRun r = test::run_crest("train --config " + config + " data.data_dir=" + d.file("cam") +
                                   " data.sample_shape=[32,48,16] output_dir=" + d.file("run") +
                                   " crest.threads=2 --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("56,454,720"), std::string::npos) << r.out;
}

// The demo the README points to: it loads and builds the whole network without data (a dry run
// reads none).
TEST(DeepcamConfigFile, DemoDryRunsTheWholeNetwork) {
  TempDir d;
  const CliRun r =
      test::run_crest("train --config " + test::source_path("configs/deepcam-demo.yaml") +
                      " output_dir=" + d.file("run") + " --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("total parameters: 56,454,720"), std::string::npos) << r.out;
}

TEST(DeepcamFromArgs, ExampleScriptConvertsToTheClosedDivisionRun) {
  const Config c = converted(kExampleArgs);
  expect_closed_division_run(c);
  EXPECT_EQ(c.data.data_dir, "/data/deepcam");
  EXPECT_EQ(c.output_dir, "/tmp/out");
  EXPECT_EQ(c.data.n_epochs, 35);
  EXPECT_EQ(c.data.seed, 1234u);
  EXPECT_EQ(c.train.checkpoint_every, 0);
  // The dist section carries the spatial split, one part per axis (the reference splits none).
  EXPECT_EQ(c.dist.spatial, (std::vector<int64_t>{1, 1}));
}

TEST(DeepcamFromArgs, EveryValueIsCommentedWithItsArgument) {
  TempDir d;
  const CliRun r = from_args(kExampleArgs, d.file("run.yaml"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string yaml = test::slurp(d.file("run.yaml"));
  for (const char* line :
       {"batch_size: 2", "# --local_batch_size", "start_lr: 0.0055", "# --start_lr",
        "weight_decay: 0.01", "# --weight_decay", "# --adam_eps", "# --lr_schedule type=multistep,",
        "# --channels (default)", "# --wireup_method dummy: crest finds its launcher",
        "# --checkpoint not given", "# --run_tag test_run", "# --model_prefix segmentation",
        "# --max_inter_threads 4", "# --logging_frequency 10", "# --save_frequency 0"})
    EXPECT_NE(yaml.find(line), std::string::npos) << line << " not in:\n" << yaml;
}

// No argument: the reference parser's defaults, a complete run (Adam at a constant 1e-3).
TEST(DeepcamFromArgs, ArgumentsLeftOutTakeTheReferenceDefaults) {
  const tools::DeepcamArgs a = tools::parse_deepcam_args({});
  const Config c = load_config_text(tools::deepcam_args_to_yaml(a, {}), "defaults.yaml");
  EXPECT_EQ(c.data.data_dir, "/");
  EXPECT_EQ(c.data.batch_size, 1);
  EXPECT_EQ(c.data.n_epochs, 30);
  EXPECT_EQ(c.data.seed, 333u);
  EXPECT_EQ(c.data.channels, kAllChannels);
  EXPECT_EQ(c.optimizer.name, "Adam");
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);  // the reference's, not Keras' 1e-7
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.999);
  EXPECT_TRUE(c.lr_schedule.per_step);
  EXPECT_EQ(c.lr_schedule.type, "none");
  EXPECT_DOUBLE_EQ(c.lr_schedule.start_lr, 1e-3);
  EXPECT_DOUBLE_EQ(*c.train.target_iou, 0.82);
  EXPECT_EQ(c.train.gradient_accumulation_frequency, 1);
  EXPECT_EQ(c.train.checkpoint_every, 0);
  EXPECT_EQ(c.dist.batchnorm_group_size, 1);
  EXPECT_EQ(c.output_dir, "runs/defaults");  // crest's default: no --output_dir
}

// utils/parser.py's 25 arguments, each set away from its default, all in one command line.
TEST(DeepcamFromArgs, AcceptsEveryReferenceArgument) {
  const std::vector<std::string> argv{"--wireup_method",
                                      "mpi",
                                      "--wandb_certdir",
                                      "/c",
                                      "--run_tag",
                                      "t",
                                      "--output_dir",
                                      "/o",
                                      "--checkpoint",
                                      "/k.cpt",
                                      "--data_dir_prefix",
                                      "/d",
                                      "--max_inter_threads",
                                      "2",
                                      "--max_epochs",
                                      "3",
                                      "--save_frequency",
                                      "4",
                                      "--gradient_accumulation_frequency",
                                      "5",
                                      "--logging_frequency",
                                      "6",
                                      "--local_batch_size",
                                      "7",
                                      "--channels",
                                      "1",
                                      "2",
                                      "--optimizer",
                                      "AdamW",
                                      "--start_lr",
                                      "0.5",
                                      "--optimizer_betas",
                                      "0.1",
                                      "0.2",
                                      "--weight_decay",
                                      "0.3",
                                      "--lr_warmup_steps",
                                      "8",
                                      "--lr_warmup_factor",
                                      "1.5",
                                      "--lr_schedule",
                                      "type=cosine_annealing,t_max=9",
                                      "--target_iou",
                                      "0.7",
                                      "--model_prefix",
                                      "m",
                                      "--batchnorm_group_size",
                                      "2",
                                      "--resume_logging",
                                      "--seed",
                                      "11"};
  const tools::DeepcamArgs a = tools::parse_deepcam_args(argv);
  EXPECT_EQ(a.given.size(), 25u);
  EXPECT_EQ(a.wireup_method, "mpi");
  EXPECT_EQ(a.wandb_certdir, "/c");
  EXPECT_EQ(a.run_tag, "t");
  EXPECT_EQ(a.checkpoint, "/k.cpt");
  EXPECT_EQ(a.max_inter_threads, 2);
  EXPECT_EQ(a.logging_frequency, 6);
  EXPECT_EQ(a.model_prefix, "m");
  EXPECT_TRUE(a.resume_logging);
  const std::string yaml = tools::deepcam_args_to_yaml(a, argv);
  EXPECT_EQ(yaml.find(" (default)"), std::string::npos) << yaml;  // no argument left out
  const Config c = load_config_text(yaml, "all.yaml");
  EXPECT_EQ(c.output_dir, "/o");
  EXPECT_EQ(c.data.data_dir, "/d");
  EXPECT_EQ(c.data.n_epochs, 3);
  EXPECT_EQ(c.train.checkpoint_every, 4);
  EXPECT_EQ(c.train.gradient_accumulation_frequency, 5);
  EXPECT_EQ(c.data.batch_size, 7);
  EXPECT_EQ(c.data.channels, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.optimizer.name, "AdamW");
  EXPECT_DOUBLE_EQ(c.lr_schedule.start_lr, 0.5);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.1);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.2);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.3);
  EXPECT_EQ(c.lr_schedule.lr_warmup_steps, 8);
  EXPECT_DOUBLE_EQ(c.lr_schedule.lr_warmup_factor, 1.5);
  EXPECT_EQ(c.lr_schedule.type, "cosine_annealing");
  EXPECT_EQ(c.lr_schedule.t_max, 9);
  EXPECT_DOUBLE_EQ(c.lr_schedule.eta_min, 0.0);
  EXPECT_DOUBLE_EQ(*c.train.target_iou, 0.7);
  EXPECT_EQ(c.dist.batchnorm_group_size, 2);
  EXPECT_EQ(c.data.seed, 11u);
}

// argparse's forms: --name=value, lists after --channels and --optimizer_betas, unique prefixes,
// negative numbers as values, flags, the last repetition winning.
TEST(DeepcamFromArgs, ReadsArgparseForms) {
  const tools::DeepcamArgs a = tools::parse_deepcam_args(
      {"--channels", "0", "2", "5", "--optimizer_betas=0.8", "0.95", "--local_batch=4", "--seed=7",
       "--seed", "8", "--lr_warmup_factor=2", "--resume_logging", "--logging_frequency", "-1",
       "--output_dir=/o=1", "--channels=3"});
  EXPECT_EQ(a.channels, std::vector<int64_t>{3});
  EXPECT_EQ(a.optimizer_betas, (std::vector<double>{0.8, 0.95}));
  EXPECT_EQ(a.local_batch_size, 4);
  EXPECT_EQ(a.seed, 8);
  EXPECT_DOUBLE_EQ(a.lr_warmup_factor, 2.0);
  EXPECT_TRUE(a.resume_logging);
  EXPECT_EQ(a.logging_frequency, -1);
  EXPECT_EQ(a.output_dir, "/o=1");
  EXPECT_EQ(a.given.count("local_batch_size"), 1u);
  EXPECT_EQ(a.given.count("max_epochs"), 0u);
  EXPECT_EQ(a.max_epochs, 30);
  const tools::DeepcamArgs b = tools::parse_deepcam_args({"--channels=1", "4", "--start_lr", "2"});
  EXPECT_EQ(b.channels, (std::vector<int64_t>{1, 4}));  // values go on after --name=value
  EXPECT_DOUBLE_EQ(b.start_lr, 2.0);
}

// Names and paths are taken literally: quotes, '#' and line breaks do not break the YAML.
TEST(DeepcamFromArgs, OddCharactersInValuesKeepTheYamlValid) {
  const std::vector<std::string> argv{
      "--run_tag",         "a\nb: c",   "--output_dir", "/o/\"q\" #x",
      "--data_dir_prefix", "/d/it's\\", "--checkpoint", "c\n#k"};
  const Config c = load_config_text(
      tools::deepcam_args_to_yaml(tools::parse_deepcam_args(argv), argv), "o.yaml");
  EXPECT_EQ(c.output_dir, "/o/\"q\" #x");
  EXPECT_EQ(c.data.data_dir, "/d/it's\\");
}

TEST(DeepcamFromArgs, CosineScheduleAdamWAndSelectedChannels) {
  const Config c = converted(
      "--optimizer AdamW --start_lr 0.00155 --optimizer_betas 0.85 0.99 --weight_decay=0.05 "
      "--lr_schedule 'type=cosine_annealing,t_max=9000,eta_min=1e-5' --lr_warmup_steps 100 "
      "--lr_warmup_factor 2 --channels 0 1 2 10 --local_batch_size 4 "
      "--gradient_accumulation_frequency 2 --batchnorm_group_size 4 --save_frequency 3 "
      "--adam_eps 1e-8 --target_iou 0.8 --data_dir_prefix '/data/with space'");
  EXPECT_EQ(c.optimizer.name, "AdamW");
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.85);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.05);
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-8);  // --adam_eps
  EXPECT_EQ(c.lr_schedule.type, "cosine_annealing");
  EXPECT_DOUBLE_EQ(c.lr_schedule.start_lr, 0.00155);
  EXPECT_EQ(c.lr_schedule.t_max, 9000);
  EXPECT_DOUBLE_EQ(c.lr_schedule.eta_min, 1e-5);
  EXPECT_EQ(c.lr_schedule.lr_warmup_steps, 100);
  EXPECT_DOUBLE_EQ(c.lr_schedule.lr_warmup_factor, 2.0);
  EXPECT_EQ(c.data.channels, (std::vector<int64_t>{0, 1, 2, 10}));
  EXPECT_EQ(c.data.model_sample_shape(), (Shape{768, 1152, 4}));
  EXPECT_EQ(c.data.batch_size, 4);
  EXPECT_EQ(c.data.data_dir, "/data/with space");
  EXPECT_EQ(c.train.gradient_accumulation_frequency, 2);
  EXPECT_EQ(c.dist.batchnorm_group_size, 4);
  EXPECT_EQ(c.train.checkpoint_every, 3);  // --save_frequency: epochs
  EXPECT_FALSE(c.train.checkpoint_every_steps);
  EXPECT_DOUBLE_EQ(*c.train.target_iou, 0.8);
}

// Two milestones in one value, and the warmup settings the reference ignores without a schedule.
TEST(DeepcamFromArgs, MilestoneListsAndWarmupWithoutSchedule) {
  Config c = converted("--lr_schedule 'type=multistep,milestones=4096 8192,decay_rate=0.5'");
  EXPECT_EQ(c.lr_schedule.milestones, (std::vector<int64_t>{4096, 8192}));
  EXPECT_DOUBLE_EQ(c.lr_schedule.decay_rate, 0.5);
  EXPECT_EQ(c.lr_schedule.lr_warmup_steps, 0);
  c = converted("--lr_warmup_steps 10 --lr_warmup_factor 2 --start_lr 0.01");
  EXPECT_EQ(c.lr_schedule.type, "none");
  EXPECT_EQ(c.lr_schedule.lr_warmup_steps, 0);  // ignored, as by the reference
  EXPECT_DOUBLE_EQ(step_lr_schedule_of(c.lr_schedule).lr(5), 0.01);
}

// Exit code 2, the argument named, nothing on stdout.
void expect_refused(const std::string& args, const std::string& named) {
  TempDir d;
  const CliRun r = from_args(args, d.file("run.yaml"));
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(named), std::string::npos) << args << "\n" << r.out;
  EXPECT_TRUE(test::slurp(d.file("run.yaml")).empty()) << args;
}

TEST(DeepcamFromArgs, MistakesExit2NamingTheArgument) {
  expect_refused("--bogus 1", "--bogus");
  expect_refused("--local_batch_size", "--local_batch_size: expects a value");
  expect_refused("--output_dir --seed 3", "--output_dir: expects a value");
  expect_refused("--local_batch_size two", "--local_batch_size: expected an integer");
  expect_refused("--start_lr 1e-3x", "--start_lr: expected a finite number");
  expect_refused("--optimizer_betas 0.9", "--optimizer_betas: expects 2 values");
  expect_refused("--optimizer SGD", "--optimizer: invalid choice 'SGD'");
  expect_refused("--wireup_method slurm", "--wireup_method: invalid choice");
  expect_refused("--lr_warmup 3", "--lr_warmup: ambiguous");
  expect_refused("--resume_logging=1", "--resume_logging: is a flag");
  expect_refused("stray", "'stray': unexpected");
  expect_refused("--channels --seed 1", "--channels: expects a value");
}

TEST(DeepcamFromArgs, MalformedLrScheduleExits2) {
  expect_refused("--lr_schedule milestones800", "--lr_schedule: 'milestones800' is not key=value");
  expect_refused("--lr_schedule milestones=800,decay_rate=0.1", "--lr_schedule: type is missing");
  expect_refused("--lr_schedule type=step", "--lr_schedule type: invalid choice 'step'");
  expect_refused("--lr_schedule type=multistep,milestones=800",
                 "--lr_schedule: multistep needs decay_rate");
  expect_refused("--lr_schedule type=cosine_annealing",
                 "--lr_schedule: cosine_annealing needs t_max");
  expect_refused("--lr_schedule 'type=multistep,milestones=8x0,decay_rate=0.1'",
                 "--lr_schedule milestones: expected an integer, got '8x0'");
  expect_refused("--lr_schedule type=cosine_annealing,t_max=10,milestones=5",
                 "--lr_schedule: 'milestones' is not a key of type cosine_annealing");
  expect_refused("--lr_schedule type=multistep,milestones=800,decay_rate=0.1=2",
                 "is not key=value");
}

// Values the reference would take but crest refuses are reported at conversion, naming the key.
TEST(DeepcamFromArgs, ValuesCrestRefusesExit2NamingTheKey) {
  expect_refused("--lr_schedule type=multistep,milestones=800,decay_rate=2",
                 "lr_schedule.decay_rate");
  expect_refused("--local_batch_size 0", "data.batch_size");
  expect_refused("--channels 16", "data.channels");
}

}  // namespace
}  // namespace crest
