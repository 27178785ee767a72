// The values a training step reads back: the forward pass leaves the loss and the L2 terms in the
// backend's memory (VectorOps::*_into), the loss's backward returns nothing, and Executor::loss
// reads them in one copy after backward. On a pretend device (CountingBackend) every VectorOps
// call that returns a value counts as a wait for the device, so the tests see that neither pass
// waits, and compare every value with the reference backend's, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/counting_backend.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

CompileOptions batch_of_two() {
  CompileOptions co;
  co.batch = 2;
  co.seed = 11;
  return co;
}

// Samples in [-1, 1); targets in [-0.9, 0.9) or class ids 0..2 with `bad` at position 5.
void fill_batch(Executor& ex, int32_t bad_label = 0) {
  test::fill_uniform(ex.input("x"), 7);
  const TensorView y = ex.input("y");
  if (y.dtype() != DType::i32) return test::fill_uniform(y, 8, -0.9, 0.9);
  for (int64_t i = 0; i < y.numel(); ++i) y.as<int32_t>()[i] = static_cast<int32_t>(i * 7 % 3);
  if (bad_label != 0) y.as<int32_t>()[5] = bad_label;
}

bool same_bytes(const void* a, const void* b, size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

// branchy_model: an MSE loss and a dense layer's L2 term; segmentation_model: a class-weighted
// softmax cross-entropy.
TEST(StepValues, NeitherPassWaitsForTheDeviceAndTheLossIsReadOnceAfterBackward) {
  for (const test::SmallModel& m : {test::branchy_model(), test::segmentation_model()}) {
    test::CountingBackend device(/*pretend_device=*/true);
    auto host = make_backend("reference");
    Executor on_device(m.graph, device, batch_of_two());
    Executor on_host(m.graph, *host, batch_of_two());
    fill_batch(on_device);
    fill_batch(on_host);
    const int copies_before = device.memory().copies_to_host;
    device.value_reads = 0;
    on_device.run_forward(true);
    on_device.backward();
    EXPECT_EQ(device.value_reads, 0) << "a pass waited for a value";
    EXPECT_EQ(device.memory().copies_to_host, copies_before) << "a pass read memory back";

    const double loss = on_device.loss();
    EXPECT_EQ(device.memory().copies_to_host, copies_before + 1);
    EXPECT_EQ(on_device.loss(), loss);  // read once
    EXPECT_EQ(device.memory().copies_to_host, copies_before + 1);
    EXPECT_EQ(device.value_reads, 0);

    EXPECT_EQ(loss, on_host.forward(true));
    EXPECT_EQ(on_device.last_data_loss(), on_host.last_data_loss());
    on_host.backward();
    const ParamStore& a = on_device.params();
    EXPECT_TRUE(same_bytes(a.grads(), on_host.params().grads(), a.trainable_bytes()));
    // The loss's output tensor is written on the device from the loss's double.
    EXPECT_EQ(on_device.output(m.loss).as<float>()[0], on_host.output(m.loss).as<float>()[0]);
  }
}

// A device's pass cannot throw for a label out of range: it notes the first one, and reading
// the loss names it in the words the host backends' pass uses.
TEST(StepValues, ABadLabelFoundOnTheDeviceIsNamedWhenTheLossIsRead) {
  const test::SmallModel m = test::segmentation_model();
  test::CountingBackend device(/*pretend_device=*/true);
  auto host = make_backend("reference");
  Executor on_device(m.graph, device, batch_of_two());
  Executor on_host(m.graph, *host, batch_of_two());
  fill_batch(on_device, /*bad_label=*/7);
  fill_batch(on_host, /*bad_label=*/7);
  std::string expected;
  try {
    on_host.forward(true);
    FAIL() << "the host backend took label 7 of 3 classes";
  } catch (const Error& e) {
    expected = e.what();
  }
  EXPECT_NE(expected.find("label 7 at batch 0, position 5 is outside [0, 3)"), std::string::npos)
      << expected;
  on_device.run_forward(true);
  on_device.backward();
  try {
    on_device.loss();
    FAIL() << "the bad label went unnamed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_EQ(std::string(e.what()), expected);
  }
}

// The step's non-finite check needs the loss before the gradients' exchange starts: the device
// raises the sideband's flag from the loss it has not read back, and the step skips the update.
TEST(StepValues, ANonFiniteLossIsFlaggedOnTheDeviceBeforeTheHostReadsIt) {
  const test::SmallModel m = test::branchy_model();
  test::CountingBackend device(/*pretend_device=*/true);
  Executor ex(m.graph, device, batch_of_two());
  SgdKeras opt(0.9);
  opt.attach(ex.params(), ex.vec());
  TrainStep step(ex, opt, nullptr);

  fill_batch(ex);
  const StepResult finite = step.run(0.01);
  EXPECT_TRUE(std::isfinite(finite.loss));
  EXPECT_FALSE(finite.nonfinite_loss);
  EXPECT_TRUE(finite.finite);

  const std::vector<std::byte> before(
      static_cast<const std::byte*>(ex.params().values()),
      static_cast<const std::byte*>(ex.params().values()) + ex.params().bytes());
  ex.input("y").as<float>()[1] = std::numeric_limits<float>::infinity();
  const StepResult infinite = step.run(0.01);
  EXPECT_FALSE(std::isfinite(infinite.loss));
  EXPECT_TRUE(infinite.nonfinite_loss) << "the sideband did not carry the loss's flag";
  EXPECT_FALSE(infinite.finite);
  EXPECT_TRUE(same_bytes(before.data(), ex.params().values(), before.size()))
      << "a step with an infinite loss updated the weights";
}

// An update's step reads the loss, the sideband's flags and the gradients' sum of squares in one
// copy (TrainStep::read_update_facts): on a device a step waits once after backward. So too with
// dynamic loss scaling (the gradients unscaled before their norm), with accumulation (a
// micro-batch that only accumulates reads its loss alone) and with the gradient lag (the facts of
// the gradients it applies, the step before's). Nothing goes the other way either: the sideband's
// flags are written on the device. Every result and weight is the host's, bit for bit.
TEST(StepValues, ATrainingStepReadsTheDeviceOnceAfterBackward) {
  struct Case {
    const char* name;
    int accumulation;
    bool lag;
    bool scaler;
  };
  for (const Case c :
       {Case{"synchronous", 1, false, false}, Case{"loss scaling", 1, false, true},
        Case{"accumulation", 2, false, false}, Case{"gradient lag", 1, true, false}}) {
    SCOPED_TRACE(c.name);
    const test::SmallModel m = test::branchy_model();
    test::CountingBackend device(/*pretend_device=*/true);
    auto host = make_backend("reference");
    Executor on_device(m.graph, device, batch_of_two());
    Executor on_host(m.graph, *host, batch_of_two());
    SgdKeras device_sgd(0.9), host_sgd(0.9);
    device_sgd.attach(on_device.params(), on_device.vec(), c.accumulation, c.lag);
    host_sgd.attach(on_host.params(), on_host.vec(), c.accumulation, c.lag);
    LossScaler device_scaler(LossScalerOptions{}), host_scaler(LossScalerOptions{});
    TrainStep on_device_step(on_device, device_sgd, nullptr, c.scaler ? &device_scaler : nullptr);
    TrainStep on_host_step(on_host, host_sgd, nullptr, c.scaler ? &host_scaler : nullptr);
    fill_batch(on_device);
    fill_batch(on_host);
    int updates = 0;
    for (int i = 0; i < 4; ++i) {
      const int copies = device.memory().copies_to_host;
      const int sent = device.memory().copies_to_device;
      device.value_reads = 0;
      const StepResult d = on_device_step.run(0.01);
      EXPECT_EQ(device.memory().copies_to_host - copies, 1) << "step " << i;
      EXPECT_EQ(device.memory().copies_to_device, sent) << "step " << i << " sent host memory";
      EXPECT_EQ(device.value_reads, 0) << "step " << i << " waited for a value";
      const StepResult h = on_host_step.run(0.01);
      EXPECT_EQ(d.loss, h.loss) << "step " << i;
      EXPECT_EQ(d.updated, h.updated) << "step " << i;
      EXPECT_EQ(d.decided, h.decided) << "step " << i;
      EXPECT_TRUE(d.finite && !d.stop_requested && !d.rank_failed && !d.overflow);
      updates += d.updated ? 1 : 0;
    }
    EXPECT_EQ(updates, c.lag ? 3 : 4 / c.accumulation);
    const ParamStore& a = on_device.params();
    EXPECT_TRUE(same_bytes(a.values(), on_host.params().values(), a.bytes()));
  }
}

}  // namespace
}  // namespace crest
