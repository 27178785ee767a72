// crest.cuda_graphs (TrainStep::record_passes, StepGraph): from the second step on, a step's
// forward and backward are recorded as one graph of the backend's stream and launched at once,
// and so is its update. On the pretend device (whose "recording" runs the work at once, and
// which counts every wait for the device inside a recording, something a GPU's capture cannot
// hold): the first step runs as it is queued, every later one's passes and update are recorded
// without a wait and launched once each, one graph is made for each and then updated, and the
// losses and weights are the reference backend's to the bit. The settings a recording cannot
// serve are refused by name (a backend that records nothing by the config:
// ConfigTest.ImpossibleValuesAreErrors). (On a GPU,
// CudaStepGraph.ARecordedStepTrainsAsTheQueuedStepBitForBit: docs/cuda.md.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/dropout_cosmoflow.hpp"

namespace crest {
namespace {

using test::values_of;

std::string record_passes_error(TrainStep& step) {
  try {
    step.record_passes();
  } catch (const Error& e) {
    return e.what();
  }
  return "(recorded)";
}

TEST(StepGraphs, FromTheSecondStepThePassesAreRecordedWithoutAWaitAndTrainAsQueued) {
  test::DeviceAndHostPrograms p;
  test::CountingBackend& device = p.device;
  Executor &on_device = p.on_device, &on_host = p.on_host;
  Adam device_adam(0.9, 0.999, 1e-8, 0.0, false), host_adam(0.9, 0.999, 1e-8, 0.0, false);
  device_adam.attach(on_device.params(), on_device.vec());
  host_adam.attach(on_host.params(), on_host.vec());
  TrainStep device_step(on_device, device_adam, nullptr), host_step(on_host, host_adam, nullptr);
  device_step.record_passes();
  const test::CountingStream& stream = device.stream();
  for (int s = 0; s < 4; ++s) {
    const double lr = 1e-3 * (s + 1);  // a schedule: the update's values change every step
    EXPECT_EQ(device_step.run(lr).loss, host_step.run(lr).loss) << "step " << s;
    EXPECT_EQ(values_of(on_device), values_of(on_host)) << "step " << s;
    EXPECT_FALSE(stream.recording) << "step " << s << " left its recording open";
  }
  // The first step runs as it is queued; the others record their passes, then their update.
  EXPECT_EQ(device_step.recorded_steps(), 3);
  EXPECT_EQ(device_step.recorded_updates(), 3);
  EXPECT_EQ(stream.recordings_begun, 6);
  EXPECT_EQ(stream.waits_while_recording, 0) << "a recorded pass or update waited for the device";
  EXPECT_EQ(stream.graphs_made, 2) << "a later recording did not update the first graphs";
  EXPECT_EQ(stream.launches, 6);
}

// A profiled step times every layer with a wait: it runs as it is queued, and recording resumes.
TEST(StepGraphs, AProfiledStepRunsAsQueued) {
  const test::DropoutCosmoFlow m;
  test::CountingBackend device(/*pretend_device=*/true);
  Executor ex(m.model.graph, device, m.options());
  m.fill(ex);
  SgdKeras sgd(0.9);
  sgd.attach(ex.params(), ex.vec());
  TrainStep step(ex, sgd, nullptr);
  step.record_passes();
  step.run(0.01);
  ex.set_profiling(true);
  step.run(0.01);
  EXPECT_EQ(device.stream().recordings_begun, 0);
  ex.set_profiling(false);
  step.run(0.01);
  EXPECT_EQ(device.stream().recordings_begun, 2) << "the passes and the update";
  EXPECT_EQ(device.stream().waits_while_recording, 0);
}

TEST(StepGraphs, WhatARecordingCannotServeIsRefusedByName) {
  const test::DropoutCosmoFlow m;
  auto host = make_backend("reference");
  Executor on_host(m.model.graph, *host, m.options());
  SgdKeras sgd(0.9);
  sgd.attach(on_host.params(), on_host.vec());
  TrainStep host_step(on_host, sgd, nullptr);
  EXPECT_NE(record_passes_error(host_step).find("crest.backend reference"), std::string::npos)
      << record_passes_error(host_step);

  test::CountingBackend device(/*pretend_device=*/true);
  Executor ex(m.model.graph, device, m.options());
  SgdKeras accumulating(0.9), lagged(0.9);
  accumulating.attach(ex.params(), ex.vec(), /*accumulation=*/2);
  TrainStep accumulation_step(ex, accumulating, nullptr);
  EXPECT_NE(record_passes_error(accumulation_step).find("train.gradient_accumulation_frequency"),
            std::string::npos);
  lagged.attach(ex.params(), ex.vec(), 1, /*gradient_lag=*/true);
  TrainStep lag_step(ex, lagged, nullptr);
  EXPECT_NE(record_passes_error(lag_step).find("train.gradient_lag"), std::string::npos);
}

}  // namespace
}  // namespace crest
