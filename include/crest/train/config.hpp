// Run configuration: the reference CosmoFlow YAML schema (mlcommons/hpc cosmoflow/configs), typed,
// with DeepCAM's data under the reference's argument names (data.name: deepcam).
//
// The reference files load unchanged; crest-only keys are additions (marked below), never
// renames. Loading validates everything up front — unknown keys, types, impossible values,
// cross-field consistency — so a run fails in the first second with a message naming the file,
// the line and the key path, instead of hours later. Loading never writes anything.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/dtype.hpp"
#include "crest/core/enum_table.hpp"
#include "crest/core/shape.hpp"
#include "crest/data/sharding.hpp"
#include "crest/engine/precision.hpp"
#include "crest/graph/attributes.hpp"
#include "crest/graph/graph.hpp"
#include "crest/optim/optimizer_config.hpp"

namespace crest {

// mlperf: submission info for the MLPerf log (all optional strings; docs/mlperf.md says what an
// empty one becomes in the log).
struct MlperfConfig {
  bool present = false;  // the section was given
  std::string org;
  std::string division;  // closed | open
  std::string status;    // onprem, cloud, ...
  std::string platform;
  // crest addition (key `stdout`): echo every :::MLLOG line to stdout as well as mllog.txt, the
  // way the reference's mllog prints them, for job logs that get collected anyway.
  bool echo_stdout = false;
};

// Each enum's spellings in one table (crest/core/enum_table.hpp): the first is printed in resolved
// YAML, any is accepted from a file (ignoring case, '_' and '-').
enum class Compression { none, gzip };
template <>
inline constexpr EnumEntries<Compression, 2> kEnumTable<Compression> = {
    {{Compression::none, "none"}, {Compression::gzip, "GZIP"}}};
enum class OnSampleError { fail, skip };
template <>
inline constexpr EnumEntries<OnSampleError, 2> kEnumTable<OnSampleError> = {
    {{OnSampleError::fail, "fail"}, {OnSampleError::skip, "skip"}}};
// data.train_order (DeepCAM only): crest's per-epoch permutation, or the DeepCAM reference's.
template <>
inline constexpr EnumEntries<TrainOrder, 2> kEnumTable<TrainOrder> = {
    {{TrainOrder::crest, "crest"}, {TrainOrder::reference, "reference"}}};
// How samples are stored. CosmoFlow: the reference's TFRecords, or crest's .npy variant
// (<stem>.data.npy int16 [D, H, W, C] beside <stem>.label.npy float32 [targets]). DeepCAM: the
// reference's HDF5 files, or NVIDIA's .npy variant (data-*.npy beside label-*.npy, or fused
// datalabel-*.npy).
// jpeg: image folders of JPEG files (data.name: imagenet).
enum class SampleFileFormat { tfrecord, npy, hdf5, jpeg };
template <>
inline constexpr EnumEntries<SampleFileFormat, 4> kEnumTable<SampleFileFormat> = {
    {{SampleFileFormat::tfrecord, "tfrecord"},
     {SampleFileFormat::npy, "npy"},
     {SampleFileFormat::hdf5, "hdf5"},
     {SampleFileFormat::jpeg, "jpeg"}}};

// data.n_train / data.n_valid of a DeepCAM dataset left out: every file of the split.
inline constexpr int64_t kEverySample = -1;

struct DataConfig {
  // A registered dataset (crest/train/dataset_registry.hpp: cosmo, dummy, deepcam), as registered.
  std::string name = "cosmo";
  // Required for cosmo and deepcam: <data_dir>/{train,validation}/ (deepcam: and stats.h5).
  // DeepCAM's reference spells it data_dir_prefix; both are read, data_dir is printed.
  std::string data_dir;
  Compression compression = Compression::none;  // YAML null/absent = none, GZIP = gzip
  int64_t n_train = 0;                          // > 0 (deepcam: kEverySample when left out)
  int64_t n_valid = 0;  // >= 0; 0 = no validation (deepcam: kEverySample when left out)
  // As in the files, channels last: cosmo/dummy [D, H, W, C]; deepcam [H, W, C] (default
  // [768, 1152, 16]; H and W multiples of 16), checked against every file read.
  Shape sample_shape;
  Shape target_shape;  // default [model.target_size] (graph: y's shape); deepcam [H, W] labels
  // deepcam: the file channels the model reads, in this order (the reference's --channels);
  // default every channel of sample_shape.
  std::vector<int64_t> channels;
  int64_t batch_size = 0;  // per rank
  int n_epochs = 0;
  bool shard = true;
  bool apply_log = false;  // reference default; x <- ln(x + 1) when true
  // imagenet: decode training images at libjpeg's smallest DCT scale that keeps the random crop
  // at least the crop size a side (less decoding; the pixels differ slightly from torchvision's).
  bool reduced_decode = false;
  int prefetch = 4;  // batches read ahead
  // Reference keys passed through to its dataset builder.
  int n_parallel_reads = 0;  // 0 = automatic
  int samples_per_file = 1;  // must be 1 (one sample per file, as in the reference data)
  bool shuffle_valid = false;
  // crest additions.
  bool shuffle = true;  // shuffle training files each epoch (reference: shuffle_train)
  uint64_t seed = 0;    // per-epoch permutation from (seed, epoch) under train_order crest
  // deepcam: the training split's order, crest's (from seed) or the DeepCAM reference's (fixed
  // seeds: the file list shuffled once with 12345, each epoch drawn with sampler seed 0 + epoch).
  TrainOrder train_order = TrainOrder::crest;
  int64_t cache_bytes = 0;  // bounded sample cache per rank; 0 = none ("4GiB" accepted)
  std::string stage_dir;    // node-local staging directory; empty = read in place
  OnSampleError on_error = OnSampleError::fail;  // a corrupt sample stops the run or is skipped
  SampleFileFormat format = SampleFileFormat::tfrecord;  // deepcam: hdf5 by default

  // One sample as the model reads it, channels last: sample_shape, with deepcam's channel
  // selection applied ([H, W, channels.size()]). model.input_shape is this.
  Shape model_sample_shape() const;
};

// The model section: a registered model (crest/models/model_registry.hpp) and its own keys, or a
// network given as a graph (docs/models.md).
struct ModelConfig {
  // A name from model_names(), or "graph": a network given as `layers:`, held in `graph`.
  std::string name = "cosmoflow";
  // A graph model's network: its first input takes the data's samples, channels first and
  // declared channels-last (CosmoFlow [C, D, H, W], DeepCAM [C, H, W]), its second the targets
  // ([targets], or DeepCAM's int32 labels [H, W]); outputs[0] the prediction, and a loss.
  std::shared_ptr<const Graph> graph;
  // A registered model's section, canonical: every key the model declares, defaults filled in
  // (input_shape is data.sample_shape). cosmoflow_options(attrs) reads CosmoFlow's.
  Attributes attrs;
};

enum class LrScaling { none, linear, sqrt };
template <>
inline constexpr EnumEntries<LrScaling, 3> kEnumTable<LrScaling> = {
    {{LrScaling::none, "none"}, {LrScaling::linear, "linear"}, {LrScaling::sqrt, "sqrt"}}};

// Two families, one per section: CosmoFlow's per-epoch schedule (base_lr, scaling, ...;
// crest/optim/lr_schedule.hpp) or DeepCAM's per-step schedule (start_lr, type, ...;
// crest/optim/step_lr_schedule.hpp), chosen by the keys the section uses.
// Without an lr_schedule section: the per-epoch family with base_lr = optimizer.lr, or the Keras
// default of the optimizer (SGD 0.01, Adam/AdamW/LAMB 0.001; LARS and LARC as SGD or as their
// Adam base), constant.
struct LrScheduleConfig {
  double base_lr = 0.01;
  LrScaling scaling = LrScaling::none;
  int64_t base_batch_size = 0;  // > 0 unless scaling is none
  int n_warmup_epochs = 0;
  std::map<int, double> decay_schedule;  // epoch -> factor applied after that epoch

  // The per-step family (the DeepCAM reference's argument names).
  bool per_step = false;  // the section uses start_lr and its companions
  double start_lr = 1e-3;
  // A registered schedule (crest/optim/lr_schedule_registry.hpp); none: constant start_lr.
  std::string type = "none";
  std::vector<int64_t> milestones;  // multistep: optimizer steps after the warmup
  double decay_rate = 0.1;          // multistep, (0, 1]
  int64_t t_max = 0;                // cosine_annealing, >= 1
  double eta_min = 0;               // cosine_annealing, >= 0
  int64_t decay_steps = 1;          // polynomial, >= 1
  double end_lr = 1e-4;             // polynomial, in [0, start_lr): MLPerf ResNet-50's
  double power = 2.0;               // polynomial, > 0
  int64_t lr_warmup_steps = 0;
  double lr_warmup_factor = 1.0;  // >= 1
  bool closed_form = false;       // crest addition: NVIDIA's closed form (multistep)
};

// What a run does when a step's loss or averaged gradients are not finite (NaN, infinity):
// stop (keeping the last good checkpoint), skip the update, or go back to the last checkpoint
// with another data order.
enum class NonFinitePolicy { stop, skip, rollback };
template <>
inline constexpr EnumEntries<NonFinitePolicy, 3> kEnumTable<NonFinitePolicy> = {
    {{NonFinitePolicy::stop, "stop"},
     {NonFinitePolicy::skip, "skip"},
     {NonFinitePolicy::rollback, "rollback"}}};
// What a failed checkpoint write (full disk, quota, I/O error) does to the run.
enum class CheckpointFailures { stop, tolerate };
template <>
inline constexpr EnumEntries<CheckpointFailures, 2> kEnumTable<CheckpointFailures> = {
    {{CheckpointFailures::stop, "stop"}, {CheckpointFailures::tolerate, "tolerate"}}};

// Dynamic loss scaling (crest/optim/loss_scaler.hpp): off, or torch.amp.GradScaler's rule.
enum class LossScaling { off, dynamic };
template <>
inline constexpr EnumEntries<LossScaling, 2> kEnumTable<LossScaling> = {
    {{LossScaling::off, "off"}, {LossScaling::dynamic, "dynamic"}}};

struct TrainConfig {
  std::string loss = "mse";
  // Canonical names; left out: [mean_absolute_error], or [iou] for data.name: deepcam.
  std::vector<std::string> metrics{"mean_absolute_error"};
  std::optional<int> early_stopping_patience;  // epochs without val_loss improvement
  std::optional<double> target_mae;            // stop at the first epoch with val MAE <= this
  std::optional<double> target_iou;   // stop at the first epoch with val IoU >= this (DeepCAM)
  std::optional<double> target_top1;  // ... with val top-1 accuracy >= this (MLPerf ResNet-50)
  // crest additions.
  int64_t checkpoint_every = 1;  // checkpoint after every N epochs (or steps); 0: at the end only
  bool checkpoint_every_steps = false;  // checkpoint_every counts steps ("500 steps")
  int checkpoint_keep = 3;              // newest checkpoints kept in output_dir/checkpoints/
  double log_every_s = 30;              // progress line interval when stdout is not a terminal
  bool report = false;                  // write output_dir/report.html and report.json
  // Micro-batches per optimizer step (the DeepCAM reference's argument): each micro-batch's loss
  // counts 1/k, the k gradients are summed, and the step counts in logs count micro-batches.
  int gradient_accumulation_frequency = 1;
  // Gradient lag (docs/distributed.md "Gradient lag"): 1 applies each step's averaged gradient one
  // step later, so its allreduce travels during the next step's forward and backward; from epoch
  // gradient_lag_start_epoch on (train.gradient_lag: {steps: 1, start_epoch: E}), synchronous
  // before.
  int gradient_lag = 0;
  int64_t gradient_lag_start_epoch = 0;
  // train.gradient_lag.correction: local — each rank updates with the average of the step before
  // less its own share of it plus its own fresh gradient (delayed gradient averaging), and the
  // ranks' models are averaged at every checkpoint and epoch end.
  bool gradient_lag_local_correction = false;
  // Local SGD (train.local_sgd: {steps, start_epoch}; docs/distributed.md "Local SGD"): after
  // start_epoch synchronous epochs (post-local SGD when > 0), windows of `steps` local updates,
  // each ending with the mean of the ranks' models; steps 1: synchronous throughout.
  int64_t local_sgd_steps = 1;
  int64_t local_sgd_start_epoch = 0;
  // Ending early and cleanly (docs/checkpoints.md "Stopping before the end").
  // Signals that stop the run after the current step with a checkpoint (names without SIG).
  std::vector<std::string> stop_signals{"TERM", "INT", "USR1"};
  // The job's wall-time budget in seconds, counted from the start of the process; unset: none.
  std::optional<double> max_wall_time_s;
  // "auto" (the default): the budget ends at SLURM_JOB_END_TIME when Slurm sets it.
  bool max_wall_time_auto = true;
  NonFinitePolicy on_nonfinite = NonFinitePolicy::stop;
  int max_rollbacks = 3;  // on_nonfinite: rollback, at most this many times per run
  CheckpointFailures checkpoint_failures = CheckpointFailures::stop;
  // Dynamic loss scaling; left out, the precision's default (config/cross_section.cpp:
  // default_loss_scaling). The scaler's settings, used when it is on.
  LossScaling loss_scaling = LossScaling::off;
  double loss_scale_initial = 65536;
  int64_t loss_scale_growth_interval = 2000;
  double loss_scale_growth_factor = 2;
  double loss_scale_backoff_factor = 0.5;
};

// crest: section (crest addition).
struct RuntimeConfig {
  // A name from backend_names(); the fastest built one by default ("onednn" where oneDNN was
  // found at build time, else "reference").
  std::string backend = default_backend_name();
  int threads = 0;  // compute threads per rank; 0 = default_threads_per_rank (core/cpus.hpp)
  // float64 needs a backend that supports it; bf16 and fp16 a backend and CPU that run them fast
  Precision precision = Precision::float32;
  // Choose each convolution's memory layouts by timing the candidates (cached per machine and
  // problem; docs/performance.md "Layouts chosen by measurement"). Off: the backend's fixed rule.
  bool autotune = false;
  // What one rank's compiled program (activations, kernel scratch, parameters and gradients) may
  // plan, in GiB; a larger plan is refused before it is allocated. 0: the node's available
  // memory (MemAvailable, or the room under the cgroup limit) shared among its ranks.
  double max_memory_gb = 0;
  // Record each training step's forward and backward, and its update, as graphs of the device's
  // stream launched at once (docs/cuda.md "Step graphs"): the cuda backend, one rank, no gradient
  // accumulation or lag.
  bool cuda_graphs = false;
};

// dist: section (crest addition): how ranks work together (docs/distributed.md).
// dist.pipeline (docs/distributed.md "Pipeline stages"): the model cut into `stages` stages over
// consecutive ranks (rank d * stages + s holds replica d's stage s), each rank's batch
// (data.batch_size) run as `micro_batches` micro-batches of data.batch_size / micro_batches.
struct PipelineConfig {
  int stages = 1;  // 1: no pipeline
  int micro_batches = 1;
  std::string schedule = "1f1b";  // gpipe | 1f1b
  bool recompute = false;         // keep only each micro-batch's inputs; recompute its forward
  // The first layer of each stage after the first; empty: cut where the stages' costs balance.
  std::vector<std::string> stage_starts;
  // The costs the default cut balances: "flops" (planned) or "time" (one measured step of the
  // whole model on rank 0 at the micro-batch size, before training).
  std::string balance = "flops";
  // With balance "time": how many times the cut is corrected from the stages' own compute times
  // (probe batches of random inputs before training, on sessions made for it); 2 unless given.
  int rebalance = 0;
};

struct DistConfig {
  std::string backend = "auto";  // auto (MPI when launched by mpirun/srun/jsrun/flux), mpi, single
  double bucket_mb = 25;  // gradient bucket size (the first bucket is smaller, first_bucket_mb)
  double first_bucket_mb = 1;     // the last layers' gradients are ready first: start early
  double timeout_s = 300;         // a collective not done by then aborts the job with a message
  std::string timeline;           // Chrome-trace file of every rank's steps (empty: none)
  std::string compress = "none";  // gradient buckets travel as float32 (none) or bf16
  // Synchronised batch norm over groups of this many consecutive ranks (the DeepCAM reference's
  // --batchnorm_group_size; 1 = each rank normalises with its own batch). Divides the rank count.
  int batchnorm_group_size = 1;
  // Every sample split among this many ranks per spatial axis ([d, h, w] for 3-D samples,
  // [h, w] for 2-D; docs/distributed.md "Spatial split"): groups of that many consecutive ranks
  // share one sample, and the data-parallel degree is the rank count divided by their product.
  // Loading fills the default, one part per axis of the data's samples.
  std::vector<int64_t> spatial;
  // Whether split convolutions overlap their halo exchange with compute: auto (where the
  // boundary rows are at most 1/32 of a rank's output rows), always, off.
  std::string halo_overlap = "auto";
  PipelineConfig pipeline;
  // Ranks per sample: the product of `spatial` (1: no split).
  int spatial_ranks() const;
};

struct Config {
  std::string source;                  // the file (or name) it was loaded from
  std::vector<std::string> overrides;  // as given, in order
  std::string output_dir;              // default runs/<file stem>
  MlperfConfig mlperf;
  DataConfig data;
  ModelConfig model;
  OptimizerConfig optimizer;
  LrScheduleConfig lr_schedule;
  TrainConfig train;
  RuntimeConfig crest;
  DistConfig dist;
  // The complete effective configuration (overrides applied, every default spelled out) as YAML
  // in the reference schema, for run directories. Loading it again gives the same Config.
  std::string resolved_yaml;
};

// Loads, applies `overrides` ("key.path=value", value parsed as YAML, e.g. data.batch_size=2 or
// data.sample_shape=[32,32,32,4]; "key=null" restores a default) and validates. Throws
// crest::Error (input; usage for a malformed override) naming the file, line and key path.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text; `source` names it in messages (e.g. "<builtin demo>").
Config load_config_text(const std::string& yaml, const std::string& source,
                        const std::vector<std::string>& overrides = {});

// Renders `config` as YAML (what resolved_yaml holds).
std::string to_yaml(const Config& config);

// Reference spellings, for logs and the resolved YAML (the first of each kEnumTable entry).
std::string scaling_name(LrScaling s);  // "none", "linear", "sqrt"

}  // namespace crest
