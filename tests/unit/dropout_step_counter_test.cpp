// The dropout masks' step counter lives in the backend's memory (Executor; VectorOps::
// dropout_at_step): each training step hands every dropout kernel the same arguments, which is
// what a captured step (a CUDA graph) replays, and the kernels draw the step's mask from the
// counter where they run. On the pretend device: no dropout kernel is handed a seed by the host,
// step 2's arguments are step 3's, the losses and weights are the reference backend's bit for bit,
// and a counter set by set_training_steps (a resume) continues the masks where they were without
// a copy to the device.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/dropout_cosmoflow.hpp"

namespace crest {
namespace {

using test::values_of;

TEST(DropoutStepCounter, EveryStepHandsTheKernelsTheSameArgumentsAndDrawsANewMask) {
  test::DeviceAndHostPrograms p;
  test::CountingBackend& device = p.device;
  Executor &on_device = p.on_device, &on_host = p.on_host;
  SgdKeras device_sgd(0.9), host_sgd(0.9);
  device_sgd.attach(on_device.params(), on_device.vec());
  host_sgd.attach(on_host.params(), on_host.vec());
  TrainStep device_step(on_device, device_sgd, nullptr), host_step(on_host, host_sgd, nullptr);

  std::vector<std::vector<test::DropoutCalls::AtStep>> calls;
  for (int s = 0; s < 3; ++s) {
    const size_t before = device.dropouts.at_step.size();
    const int copies = device.memory().copies_to_device;
    EXPECT_EQ(device_step.run(0.01).loss, host_step.run(0.01).loss) << "step " << s;
    EXPECT_EQ(device.memory().copies_to_device, copies) << "step " << s;
    calls.emplace_back(device.dropouts.at_step.begin() + static_cast<std::ptrdiff_t>(before),
                       device.dropouts.at_step.end());
  }
  EXPECT_EQ(device.dropouts.host_seeded, 0) << "a dropout kernel took its seed from the host";
  ASSERT_FALSE(calls[1].empty()) << "the model's dropout ran no kernel";
  EXPECT_EQ(calls[1], calls[2]) << "a step handed the dropout kernels other arguments";
  EXPECT_EQ(values_of(on_device), values_of(on_host));
  EXPECT_EQ(on_device.training_steps(), 3u);
}

// Without an update the weights stay: each training forward's loss differs only by its masks. A
// second program set to 2 steps (a resume's set_training_steps) draws the third step's masks.
TEST(DropoutStepCounter, ASetCounterContinuesTheMasksWithoutACopy) {
  const test::DropoutCosmoFlow m;
  test::CountingBackend device(/*pretend_device=*/true);
  Executor first(m.model.graph, device, m.options());
  m.fill(first);
  std::vector<double> losses;
  losses.reserve(3);
  for (int s = 0; s < 3; ++s) losses.push_back(first.forward(true));
  EXPECT_NE(losses[0], losses[1]) << "two steps drew the same masks";
  EXPECT_NE(losses[1], losses[2]);

  Executor resumed(m.model.graph, device, m.options());
  m.fill(resumed);
  const int copies = device.memory().copies_to_device;
  resumed.set_training_steps(2);
  EXPECT_EQ(device.memory().copies_to_device, copies);
  EXPECT_EQ(resumed.forward(true), losses[2]);
  resumed.set_training_steps(0);
  EXPECT_EQ(resumed.forward(true), losses[0]);
  EXPECT_EQ(resumed.forward(false), first.forward(false)) << "evaluation draws no mask";
}

}  // namespace
}  // namespace crest
