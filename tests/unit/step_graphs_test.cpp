// crest.cuda_graphs (TrainStep::record_passes, StepGraph): from the second step on, a step's
// forward and backward are recorded as one graph of the backend's stream and launched at once,
// and so is its update; a later step whose key (the inputs' addresses, the loss scale, the
// sideband's flags) was recorded before launches that graph again. On the pretend device (whose
// "recording" runs the work at once, so a graph launched again runs its work again, and which
// counts every wait for the device inside a recording, something a GPU's capture cannot hold):
// the first step runs as it is queued, the second's passes and update are recorded without a
// wait, later ones launch them again (a batch buffer seen before: its own recording; more
// buffers than graphs kept: the least recently run graph updated in place), and the losses and
// weights are the reference backend's to the bit. The settings a recording cannot serve are
// refused by name (a backend that records nothing by the config:
// ConfigTest.ImpossibleValuesAreErrors). (On a GPU, where a graph launched again runs without
// the host: CudaStepGraph.ARecordedStepTrainsAsTheQueuedStepBitForBit, docs/cuda.md.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "crest/dist/gradient_sync.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/bound_batches.hpp"
#include "support/dropout_cosmoflow.hpp"
#include "support/fake_communicator.hpp"
#include "support/fake_device_collectives.hpp"

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
  // The first step runs as it is queued; the second records its passes, then its update; the
  // others launch both again (one batch, one loss scale: one key).
  EXPECT_EQ(device_step.recorded_steps(), 1);
  EXPECT_EQ(device_step.recorded_updates(), 1);
  EXPECT_EQ(device_step.replayed_steps(), 2);
  EXPECT_EQ(device_step.replayed_updates(), 2);
  EXPECT_EQ(stream.recordings_begun, 2);
  EXPECT_EQ(stream.waits_while_recording, 0) << "a recorded pass or update waited for the device";
  EXPECT_EQ(stream.graphs_made, 2);
  EXPECT_EQ(stream.launches, 6);
  // The host's side of every step ran, launched again or not.
  EXPECT_EQ(on_device.training_steps(), 4U);
  EXPECT_EQ(device_adam.steps_taken(), 4);
}

// The two programs, each with heavy-ball SGD and a training step.
struct SgdSteps : test::DeviceAndHostPrograms {
  SgdSteps() {
    device_sgd.attach(on_device.params(), on_device.vec());
    host_sgd.attach(on_host.params(), on_host.vec());
  }
  SgdKeras device_sgd{0.9}, host_sgd{0.9};
  TrainStep device_step{on_device, device_sgd, nullptr}, host_step{on_host, host_sgd, nullptr};
};

// Trains `steps` steps on the pretend device and the reference backend, batch s % batches at
// step s, the device's passes recorded; checks every loss and the weights after every step.
void train_on_bound_batches(SgdSteps& p, int batches, int steps) {
  const test::BoundBatches device_batches(p.on_device, batches), host_batches(p.on_host, batches);
  p.device_step.record_passes();
  for (int s = 0; s < steps; ++s) {
    device_batches.bind(p.on_device, s % batches);
    host_batches.bind(p.on_host, s % batches);
    EXPECT_EQ(p.device_step.run(0.01).loss, p.host_step.run(0.01).loss) << "step " << s;
    EXPECT_EQ(values_of(p.on_device), values_of(p.on_host)) << "step " << s;
  }
}

TEST(StepGraphs, ABatchBufferSeenBeforeLaunchesItsOwnRecordingAgain) {
  SgdSteps p;
  const TrainStep& device_step = p.device_step;
  // Batches A B A B A: A queued, B recorded, A recorded, then B's and A's launched again.
  train_on_bound_batches(p, 2, 5);
  EXPECT_EQ(device_step.recorded_steps(), 2);
  EXPECT_EQ(device_step.replayed_steps(), 2);
  EXPECT_EQ(device_step.recorded_updates(), 1);
  EXPECT_EQ(device_step.replayed_updates(), 3);
  EXPECT_EQ(p.device.stream().graphs_made, 3) << "one per batch buffer, one for the update";
  EXPECT_EQ(p.device.stream().waits_while_recording, 0);
}

TEST(StepGraphs, MoreBatchBuffersThanGraphsKeptRecordIntoTheLeastRecentlyRunGraph) {
  SgdSteps p;
  const TrainStep& device_step = p.device_step;
  // A cycle one longer than the graphs kept: the graph a buffer needs is always the one that was
  // evicted last, so every step after the first records, into a graph updated in place.
  const int batches = 5;
  train_on_bound_batches(p, batches, 2 * batches);
  EXPECT_EQ(device_step.recorded_steps(), 2 * batches - 1);
  EXPECT_EQ(device_step.replayed_steps(), 0);
  EXPECT_EQ(p.device.stream().graphs_made, batches) << "four kept for the passes, one update";
}

// The loss scale is a kernel argument (the loss layer's gradient, the L2 terms): a new scale is a
// new recording, launched again while the scale stays.
TEST(StepGraphs, ANewLossScaleIsRecordedAnew) {
  SgdSteps p;
  p.device_step.record_passes();
  for (const double scale : {1.0, 1.0, 2.0, 2.0}) {
    p.on_device.set_loss_scale(scale);
    p.on_host.set_loss_scale(scale);
    EXPECT_EQ(p.device_step.run(0.01).loss, p.host_step.run(0.01).loss) << "scale " << scale;
    EXPECT_EQ(values_of(p.on_device), values_of(p.on_host)) << "scale " << scale;
  }
  // 1 queued, 1 recorded, 2 recorded, 2 launched again.
  EXPECT_EQ(p.device_step.recorded_steps(), 2);
  EXPECT_EQ(p.device_step.replayed_steps(), 1);
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

// Two ranks (a fake job whose other rank adds nothing) on each side: the device's buckets reduced
// by its own collectives, the reference backend's by the host communicator.
struct ExchangingSgdSteps : test::DeviceAndHostPrograms {
  ExchangingSgdSteps() {
    device_sync.reduce_on_device(std::make_unique<test::FakeDeviceCollectives>(device, calls),
                                 42.0);
    device_sgd.attach(on_device.params(), on_device.vec());
    host_sgd.attach(on_host.params(), on_host.vec());
  }
  test::FakeCommunicator device_comm{0, 2}, host_comm{0, 2};
  // Small buckets: several, the first started while backward runs.
  GradientSync device_sync{device_comm, on_device.params(), on_device.gradient_ready_order(), 1e-3,
                           2e-3},
      host_sync{host_comm, on_host.params(), on_host.gradient_ready_order(), 1e-3, 2e-3};
  test::DeviceCalls calls;
  SgdKeras device_sgd{0.9}, host_sgd{0.9};
  TrainStep device_step{on_device, device_sgd, &device_sync},
      host_step{on_host, host_sgd, &host_sync};
};

// With several ranks the exchange is recorded with the passes: the buckets backward starts, the
// rest, and the stream put behind them (join) without a wait; the step waits once, after the
// launch, within the deadline. The losses and weights are the host exchange's bit for bit.
TEST(StepGraphs, AnExchangeOnTheDeviceIsRecordedWithThePasses) {
  ExchangingSgdSteps p;
  ASSERT_GT(p.device_sync.buckets().size(), 1U);
  p.device_step.record_passes();
  const int steps = 4;
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ(p.device_step.run(0.01).loss, p.host_step.run(0.01).loss) << "step " << s;
    EXPECT_EQ(values_of(p.on_device), values_of(p.on_host)) << "step " << s;
  }
  EXPECT_EQ(p.device_step.recorded_steps(), 1);
  EXPECT_EQ(p.device_step.replayed_steps(), 2);
  EXPECT_EQ(p.device.stream().waits_while_recording, 0) << "an exchange waited inside a recording";
  // Every step joined where its passes ran (the first as queued, the second inside its
  // recording, the others as the pretend device runs a launched recording: again) and waited
  // after them; none waited for the collectives alone.
  EXPECT_EQ(p.calls.waits, 0);
  EXPECT_EQ(p.calls.joins, steps);
  EXPECT_EQ(p.calls.stream_waits, steps);
  EXPECT_EQ(p.calls.allreduces, steps * static_cast<int>(p.device_sync.buckets().size()));
  for (size_t i = 0; i < p.calls.whats.size(); ++i) {
    EXPECT_EQ(p.calls.timeouts[i], 42.0);
    EXPECT_NE(p.calls.whats[i].find("on fake-nccl"), std::string::npos) << p.calls.whats[i];
  }
  EXPECT_EQ(p.device_sync.stats().steps, steps);
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

  // An exchange through host copies, or one that narrows its buckets, waits on the host.
  test::FakeCommunicator comm(0, 2);
  SgdKeras exchanging(0.9);
  exchanging.attach(ex.params(), ex.vec());
  GradientSync host_copies(comm, ex.params(), ex.gradient_ready_order(), 1e-3, 2e-3);
  TrainStep host_copies_step(ex, exchanging, &host_copies);
  EXPECT_NE(record_passes_error(host_copies_step).find("reduced on the device (NCCL)"),
            std::string::npos)
      << record_passes_error(host_copies_step);
  test::DeviceCalls calls;
  GradientSync narrowed(comm, ex.params(), ex.gradient_ready_order(), 1e-3, 2e-3,
                        GradientCompression::bf16);
  narrowed.reduce_on_device(std::make_unique<test::FakeDeviceCollectives>(device, calls), 42.0);
  TrainStep narrowed_step(ex, exchanging, &narrowed);
  EXPECT_NE(record_passes_error(narrowed_step).find("dist.compress: none"), std::string::npos)
      << record_passes_error(narrowed_step);
}

}  // namespace
}  // namespace crest
