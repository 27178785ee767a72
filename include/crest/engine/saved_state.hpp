// What a checkpoint or a weight file saves of a training: the whole model's parameters and its
// optimizer's state as one process holds them, wherever they live — one process's store, or a
// pipeline's stages on their own ranks (PipelineTrainingSession::saved_state). The writer asks
// for each tensor in turn, so the whole model need never be in memory on one rank.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crest/engine/checkpoint_file.hpp"
#include "crest/graph/executor.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

class SavedState {
 public:
  virtual ~SavedState() = default;
  // The whole model's slots (their buffers need not exist on this rank).
  virtual const ParamStore& layout() const = 0;
  // The optimizer's state buffers' names, its name and the counters a checkpoint records (the
  // executor's dropout counter, the optimizer's steps): the same on every rank.
  virtual std::vector<std::string> optimizer_states() const = 0;
  virtual std::string optimizer_name() const = 0;
  virtual uint64_t executor_steps() const = 0;
  virtual int64_t optimizer_steps() const = 0;
  // Collective over the job. The job's rank 0 calls `write` with each tensor's bytes on request
  // (the parameters' values alone without `with_optimizer`) while the ranks that hold them serve
  // its requests; what `write` throws is rethrown on rank 0 once the others are released.
  virtual void provide(bool with_optimizer,
                       const std::function<void(const checkpoint_file::StateBytes&)>& write) = 0;
};

// One process's model and optimizer, alike on every rank of the job (data parallelism): the
// job's rank 0 writes from its own memory, a spatial group's divided parameters gathered whole
// onto it first.
class ProcessSavedState final : public SavedState {
 public:
  ProcessSavedState(Executor& ex, Optimizer& optimizer, bool writer)
      : ex_(ex), optimizer_(optimizer), writer_(writer) {}
  const ParamStore& layout() const override { return ex_.params(); }
  std::vector<std::string> optimizer_states() const override;
  std::string optimizer_name() const override { return optimizer_.name(); }
  uint64_t executor_steps() const override { return ex_.training_steps(); }
  int64_t optimizer_steps() const override { return optimizer_.steps_taken(); }
  void provide(bool with_optimizer,
               const std::function<void(const checkpoint_file::StateBytes&)>& write) override;

 private:
  Executor& ex_;
  Optimizer& optimizer_;
  bool writer_;
};

}  // namespace crest
