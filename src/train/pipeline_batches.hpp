// A rank's batches through its pipeline stage (dist.pipeline; docs/distributed.md "Pipeline
// stages"): each batch cut into micro-batches fed to the stage's inputs (the samples on the first
// stage, the targets on the last), the training step in the trainer's terms (StepResult), and
// the validation pass.
#pragma once
#include <map>
#include <memory>
#include <optional>

#include "crest/data/loader.hpp"
#include "crest/engine/pipeline_training_session.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/models/built_model.hpp"
#include "crest/train/task.hpp"
#include "validation.hpp"

namespace crest {

class BatchFeed;
class PassSums;

class PipelineBatches {
 public:
  // `batch`: each rank's batch (data.batch_size), cut into the session's micro-batches.
  PipelineBatches(PipelineTrainingSession& pipeline, const BuiltModel& model, int64_t batch,
                  int micro_batches);
  ~PipelineBatches();
  PipelineBatches(const PipelineBatches&) = delete;
  PipelineBatches& operator=(const PipelineBatches&) = delete;

  // One training step on `batch` (null: this rank could not read it; the stage runs on the inputs
  // it holds, so the pipeline's messages still match, and `failed_here` skips the update
  // everywhere).
  StepResult train(double lr, const LoadedBatch* batch, bool stop_here, bool failed_here);
  // The model's prediction in the last stage's graph; -1 on the other stages.
  ValueId prediction() const { return prediction_; }
  // Local SGD: averages an open window's models (PipelineTrainStep::end_local_window).
  StepResult end_local_window();

  // Post-mortem after a step whose gradients were not finite, collective over the world: the
  // first non-finite gradient in the whole model's order and how many are, as one process
  // names them. Each stage scans its own; every replica holds the same averaged gradients.
  TrainStep::NonFiniteGradients find_nonfinite_gradients();

  // The validation pass of `epoch` (0-based) over `batches` batches: each batch's micro-batches
  // through the stages in evaluation mode; an incomplete batch sample by sample, each sample
  // copied into every place of a micro-batch. The last stages score; the sums are reduced over
  // the world, each sample once. `loader`: null on a stage that reads nothing (it runs the passes
  // its pipeline's readers run).
  ValidationResult validate(DataLoader* loader, int64_t batches, MetricScoring& scoring,
                            Communicator& world, int epoch);

 private:
  struct Pass;
  void evaluate(const std::vector<Pass>& passes, const LoadedBatch& b, PassSums& sums);
  // `passes` evaluations on the inputs the stage holds, scoring nothing: a rank that could not
  // read its batch keeps its pipeline's messages matched.
  void run_unscored(size_t passes);
  static StepResult step_result(const PipelineStepResult& p);
  // The feed into `ex`, one of the stage's activation sets.
  BatchFeed& feed_of(Executor& ex);

  PipelineTrainingSession& pipeline_;
  const BuiltModel& model_;
  int64_t micro_batch_ = 1;
  int micro_batches_ = 1;
  ValueId prediction_ = -1;  // the model's prediction in the last stage's graph; -1 elsewhere
  std::vector<std::byte> prediction_copy_;  // the prediction off a device (host_readable)
  std::map<const Executor*, std::unique_ptr<BatchFeed>> feeds_;  // per activation set
};

}  // namespace crest
