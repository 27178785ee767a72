#include "pipeline_batches.hpp"

#include <algorithm>
#include <cmath>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/dist/timeline.hpp"
#include "crest/train/batch_feed.hpp"
#include "crest/train/run_directory.hpp"
#include "pass_sums.hpp"
#include "rank_failure.hpp"
#include "test_faults.hpp"

namespace crest {

namespace {

// The value named `name` among the marked outputs of `g`, or -1.
ValueId marked_output(const Graph& g, const std::string& name) {
  for (ValueId v : g.outputs())
    if (g.value_name(v) == name) return v;
  return -1;
}

}  // namespace

// One evaluate() call: per micro-batch, its first sample and its count (a whole micro-batch), or
// one sample copied into every place (count 1); `scored` false for the padding of the last call.
struct PipelineBatches::Pass {
  struct MicroBatch {
    int64_t first = 0, count = 0;
    bool scored = true;
  };
  std::vector<MicroBatch> micro_batches;
};

PipelineBatches::PipelineBatches(PipelineTrainingSession& pipeline, const BuiltModel& model,
                                 int64_t batch, int micro_batches)
    : pipeline_(pipeline),
      model_(model),
      micro_batch_(batch / micro_batches),
      micro_batches_(micro_batches) {
  CREST_CHECK(micro_batch_ * micro_batches == batch, "micro-batches that do not divide the batch");
  if (pipeline.ranks().last_stage()) {
    prediction_ =
        marked_output(pipeline.stage_graph().graph, model.graph.value_name(model.prediction));
    CREST_CHECK(prediction_ >= 0, "the last pipeline stage does not output the prediction");
  }
}

PipelineBatches::~PipelineBatches() = default;

// Made once per activation set (the stage's executors), so a step allocates nothing here.
BatchFeed& PipelineBatches::feed_of(Executor& ex) {
  std::unique_ptr<BatchFeed>& f = feeds_[&ex];
  if (!f) f = std::make_unique<BatchFeed>(ex, model_, pipeline_.stage_graph().data_inputs, -1);
  return *f;
}

StepResult PipelineBatches::train(double lr, const LoadedBatch* batch, bool stop_here,
                                  bool failed_here) {
  const bool feeds = !pipeline_.stage_graph().data_inputs.empty();
  auto feed = [&](int m, Executor& ex) {
    if (batch && feeds) feed_of(ex).feed_part(*batch, m * micro_batch_, micro_batch_);
  };
  return step_result(pipeline_.step().run(lr, feed, stop_here, failed_here));
}

StepResult PipelineBatches::end_local_window() {
  return step_result(pipeline_.step().end_local_window());
}

// What the trainer acts on, every rank alike: the pipeline decides every step it reports.
StepResult PipelineBatches::step_result(const PipelineStepResult& p) {
  StepResult r;
  r.loss = p.loss;
  r.decided = true;
  r.finite = p.finite;
  r.nonfinite_loss = p.nonfinite_loss;
  r.stop_requested = p.stop_requested;
  r.rank_failed = p.rank_failed;
  r.updated = p.updated;
  r.overflow = p.overflow;
  r.loss_scale = p.loss_scale;
  r.forward_done = r.backward_done = r.gradients_done = r.update_done = Timeline::now();
  return r;
}

TrainStep::NonFiniteGradients PipelineBatches::find_nonfinite_gradients() {
  TrainStep::NonFiniteGradients bad =
      TrainStep::find_nonfinite_gradients(pipeline_.executor().params());
  Communicator& line = pipeline_.pipeline();  // this replica's stages; rank = stage
  const int stages = pipeline_.ranks().stages;
  // The first stage holding one names it: the largest of -stage over the stages holding one.
  const int first_stage =
      -static_cast<int>(line.allreduce_max(bad.count > 0 ? -pipeline_.ranks().stage : -stages));
  int64_t count = bad.count;
  line.allreduce_sum(&count, 1);
  bad.count = static_cast<int>(count);
  if (first_stage < stages) broadcast_text(line, bad.first, first_stage);
  return bad;
}

void PipelineBatches::evaluate(const std::vector<Pass>& passes, const LoadedBatch& b,
                               PassSums& sums) {
  for (const Pass& pass : passes) {
    auto feed = [&](int m, Executor& ex) {
      const Pass::MicroBatch& mb = pass.micro_batches[static_cast<size_t>(m)];
      BatchFeed& f = feed_of(ex);
      if (mb.count == 1 && micro_batch_ > 1)
        f.feed_copies_of(b, mb.first);
      else
        f.feed_part(b, mb.first, mb.count);
    };
    auto read = [&](int m, const Executor& ex) {
      const Pass::MicroBatch& mb = pass.micro_batches[static_cast<size_t>(m)];
      if (!mb.scored) return;
      sums.add_pass(ex, mb.count, micro_batch_);
      if (sums.has_metrics())
        sums.add_metrics(samples_of(host_readable(pipeline_.backend().memory(),
                                                  ex.output(prediction_), prediction_copy_),
                                    0, mb.count),
                         samples_of(b.target, mb.first, mb.count));
    };
    pipeline_.stage().evaluate(
        feed, prediction_ >= 0 ? PipelineStage::Read(read) : PipelineStage::Read());
  }
}

void PipelineBatches::run_unscored(size_t passes) {
  for (size_t i = 0; i < passes; ++i) pipeline_.stage().evaluate([](int, Executor&) {});
}

ValidationResult PipelineBatches::validate(DataLoader* loader, int64_t batches,
                                           MetricScoring& scoring, Communicator& world, int epoch) {
  PassSums sums(scoring);
  RankFailure failure;
  if (loader) loader->start_epoch(epoch);
  const auto m = static_cast<size_t>(micro_batches_);
  for (int64_t s = 0; s < batches; ++s) {
    std::optional<LoadedBatch> b;
    std::vector<Pass> passes;
    if (loader && !failure.failed()) {
      try {
        b = loader->next();
        if (s == 0 && validation_failure_asked(epoch + 1, world.rank()))
          throw_input(
              "test fault: a validation batch could not be read "
              "(CREST_TEST_VALIDATION_FAILURE_AT_EPOCH)");
      } catch (const std::exception& e) {
        failure.record(e);
        if (b) loader->release(*b);
        b.reset();
      }
    }
    if (b && b->complete()) {
      Pass pass;
      for (size_t k = 0; k < m; ++k)
        pass.micro_batches.push_back({static_cast<int64_t>(k) * micro_batch_, micro_batch_});
      passes.push_back(pass);
    } else if (b) {
      std::vector<int64_t> present;
      for (size_t place = 0; place < b->present.size(); ++place)
        if (b->present[place]) present.push_back(static_cast<int64_t>(place));
      for (size_t at = 0; at < present.size(); at += m) {
        Pass pass;
        for (size_t k = 0; k < m; ++k)
          pass.micro_batches.push_back(
              {present[std::min(at + k, present.size() - 1)], 1, at + k < present.size()});
        passes.push_back(pass);
      }
    }
    // The stages run the same passes; a rank that could not read, or reads nothing, runs them on
    // what it holds.
    const auto agreed =
        static_cast<size_t>(pipeline_.pipeline().allreduce_max(static_cast<double>(passes.size())));
    if (b) {
      CREST_CHECK(passes.size() == agreed, "a pipeline's stages read different validation batches");
      evaluate(passes, *b, sums);
      loader->release(*b);
    } else {
      run_unscored(agreed);
    }
  }
  const int64_t skipped = prediction_ >= 0 ? loader->stats().skipped : 0;
  return sums.reduce(world, skipped, failure, epoch);
}

}  // namespace crest
