#include "step_timeline.hpp"

#include <string>

namespace crest {

void record_step(Timeline& timeline, const GradientSync* exchange, int64_t step_in_epoch,
                 double data_start, double data_done, const StepResult& r) {
  if (!timeline.enabled()) return;
  const std::string step = std::to_string(step_in_epoch);
  const std::string args = "{\"step\":" + step + "}";
  timeline.span("data wait", Timeline::compute, data_start, data_done, args);
  if (!exchange) {  // a pipeline stage: its schedule, exchange and update as one span
    timeline.span("pipeline step", Timeline::compute, data_done, r.update_done, args);
    return;
  }
  const GradientSync& sync = *exchange;
  timeline.span("forward", Timeline::compute, data_done, r.forward_done, args);
  timeline.span("backward", Timeline::compute, r.forward_done, r.backward_done, args);
  if (sync.ranks() > 1)
    timeline.span("gradient wait", Timeline::compute, r.backward_done, r.gradients_done, args);
  timeline.span("optimizer", Timeline::compute, r.gradients_done, r.update_done, args);
  const auto& timing = sync.last_step_timing();
  for (size_t k = 0; k < timing.size(); ++k) {
    const std::string bucket =
        "bucket " + std::to_string(k + 1) + "/" + std::to_string(timing.size());
    const std::string bucket_args =
        "{\"step\":" + step + ",\"bytes\":" + std::to_string(sync.buckets()[k].bytes()) + "}";
    timeline.span(bucket + " queued", Timeline::communication, timing[k].queued, timing[k].started,
                  bucket_args);
    timeline.span("allreduce " + bucket, Timeline::communication, timing[k].started, timing[k].done,
                  bucket_args);
  }
}

}  // namespace crest
