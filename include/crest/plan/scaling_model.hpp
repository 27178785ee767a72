// The scaling model of crest plan (docs/scaling.md): for a network (ModelFacts), a machine and a
// decomposition of a fixed global batch over some ranks, the predicted step time, how much of
// the communication is hidden, the parallel efficiency, memory per rank and I/O demand.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "crest/plan/machine.hpp"
#include "crest/plan/model_facts.hpp"

namespace crest {

// How the ranks share the work of one step.
struct Decomposition {
  int ranks = 1;
  std::vector<int> spatial{};  // parts per spatial axis (dist.spatial); empty: no split
  int pipeline_stages = 1, micro_batches = 1;  // pipeline: stages x micro-batches (1: none)
  bool gradient_lag = false;                   // train.gradient_lag 1
  bool lag_correction = false;  // with gradient_lag: train.gradient_lag.correction: local
  int local_sgd_steps = 1;      // train.local_sgd.steps (1: synchronous)
  int spatial_ranks() const;    // ranks holding one sample
  int data_parallel() const;    // replicas of the model
  std::string name() const;     // "data", "spatial [2, 1, 1]", ...
};

struct PlanOptions {
  int64_t global_batch = 1;
  double bucket_mb = 25, first_bucket_mb = 1;  // dist.bucket_mb, dist.first_bucket_mb
  int gradient_element_bytes = 4;              // dist.compress: 4, or 2 for bf16/fp16
  bool staged = false;                         // data.stage_dir: read from node-local storage
  bool dynamic_loss_scaling = false;  // local SGD's steps then agree on overflows (an allreduce)
};

// Where a prediction's compute time came from.
enum class ComputeSource { measured, measured_rate, given_rate };

struct Prediction {
  Decomposition d;
  int64_t batch_per_replica = 0;  // data.batch_size of the candidate
  int threads_per_rank = 1;
  double compute_s = 0;            // forward + backward + update of one rank
  double update_s = 0;             // the optimizer's share
  double gradient_exchange_s = 0;  // the gradient (or model) exchange's time per step
  double exposed_exchange_s = 0;   // the part compute did not hide
  double halo_s = 0;               // spatial: halo exchanges and group reductions (not hidden)
  double pipeline_s = 0;           // pipeline: point-to-point sends of the boundary activations
  double straggler_s = 0;          // waiting for the slowest rank (Machine::step_jitter)
  double bubble_fraction = 0;      // pipeline: (K - 1) / (M + K - 1)
  double io_s = 0;                 // reading one step's samples on one node
  double loader_s = 0;             // a rank's loader on its batch at the measured rate; 0: none
  double step_s = 0;
  double samples_per_s = 0;
  double efficiency = 0;    // samples/s over (ranks x one rank's samples/s at the same batch)
  double memory_bytes = 0;  // per rank, the largest
  double io_gb_s_per_node = 0;
  bool fits = true;      // memory_bytes within the machine's memory per rank
  bool runnable = true;  // crest can run it today
  // It changes training in a way measured not to train with the config's settings (the lag
  // under momentum SGD: ModelFacts::lag_caution, in the notes): never recommended.
  bool cautioned = false;
  ComputeSource source = ComputeSource::given_rate;
  std::vector<std::string> notes;
  double hidden_fraction() const {
    return gradient_exchange_s > 0 ? 1 - exposed_exchange_s / gradient_exchange_s : 1;
  }
  // The config overrides that run it: {"data.batch_size=4", "dist.spatial=[2,1,1]", ...}.
  std::vector<std::string> overrides() const;
};

// Time of one float allreduce of `bytes` over `ranks` ranks placed `ranks_per_node` to a node:
// a ring within the node, a tree across nodes over each node's injection bandwidth
// (docs/scaling.md, "Collectives").
double allreduce_seconds(const Machine& m, double bytes, int ranks, int ranks_per_node);

// The expected largest of `n` independent standard normal draws (Blom's approximation,
// Φ⁻¹((n − 0.375) / (n + 0.25))): how many standard deviations the slowest of n ranks lags.
double expected_max_of_normals(int n);

// Predicts one decomposition; crest::Error (usage) when it cannot hold the global batch.
Prediction predict(const ModelFacts& model, const Machine& machine, const Decomposition& d,
                   const PlanOptions& options);

// Every decomposition of `ranks` ranks worth predicting for the global batch: data parallel, with
// the lag, local SGD (`local_sgd_steps`), spatial splits (one to three axes) and pipelines.
std::vector<Decomposition> candidate_decompositions(const ModelFacts& model, int ranks,
                                                    const PlanOptions& options,
                                                    int local_sgd_steps = 4);

// The candidates' predictions, best first: runnable plans that fit before the rest, then by
// samples/s.
std::vector<Prediction> rank_predictions(std::vector<Prediction> predictions);

// Which of `ranked` to recommend: among the runnable plans that fit, are not cautioned and come
// within `margin` of the fastest such plan's samples/s, the one that changes training least —
// synchronous data parallelism, then a spatial split (the same arithmetic, more machinery), then
// the lag, then local SGD (both change what each update sees: docs/convergence.md). A model's few
// percent are within its error (docs/scaling.md), a different optimisation is not. ranked.size()
// when none fits.
size_t recommended_index(const std::vector<Prediction>& ranked, double margin = 0.05);

}  // namespace crest
