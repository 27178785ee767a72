// Continuing a run from its checkpoint (crest train --resume): rank 0 reads and verifies the
// checkpoint completely before anything changes, then every rank takes rank 0's weights,
// optimizer state and position.
#pragma once
#include <vector>

#include "crest/dist/gradient_sync.hpp"
#include "crest/train/checkpoint.hpp"
#include "crest/train/run_directory.hpp"

namespace crest {

class PipelineTrainingSession;

// Loads `run_dir`'s checkpoint into `ex`, `optimizer` and `scaler` (null: no loss scaling) on
// every rank (collective) and returns the position to continue from; `history` gets the finished
// epochs (rank 0). `shards`: the job's data-parallel shards, which a position inside an epoch
// needs unchanged (the world's size, or fewer where a spatial group shares each sample). Throws
// crest::Error (input) on every rank when the checkpoint cannot continue this job. A checkpoint
// without a loss scale leaves the scaler at its initial scale.
TrainingPosition resume_from_checkpoint(const RunDirectory& run_dir, const Config& config,
                                        Communicator& comm, int shards, GradientSync& sync,
                                        Executor& ex, Optimizer& optimizer, LossScaler* scaler,
                                        int64_t steps_per_epoch, std::vector<EpochStats>& history);

// The same for a pipeline (dist.pipeline): rank 0 verifies the whole model's checkpoint (which
// any stage count, or none, wrote) and sends every stage its part tensor by tensor
// (PipelineTrainingSession::load_state). `shards` are the pipeline's replicas.
TrainingPosition resume_pipeline_from_checkpoint(const RunDirectory& run_dir, const Config& config,
                                                 Communicator& comm, PipelineTrainingSession& p,
                                                 int64_t steps_per_epoch,
                                                 std::vector<EpochStats>& history);

}  // namespace crest
