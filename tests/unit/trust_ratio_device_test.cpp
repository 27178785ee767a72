// LARS's and LARC's trust ratios on a device: the tensors' norms stay in the device's memory
// (VectorOps::range_sum_squares_into) and each update computes its ratio where it runs
// (lars_trust_update, sgd_keras_trust_update, larc_trust_rescale), so an optimizer step hands no
// value back to the host. On the pretend device (test::CountingBackend), whose VectorOps count
// every call that returns a value, the weights and the optimizer state after each step are the
// host's to the bit, in every momentum form and LARC mode, with excluded tensors and a tensor
// of zeros (ratio 1; LARC leaves its gradient alone) among them.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "crest/optim/larc.hpp"
#include "crest/optim/lars.hpp"
#include "support/device_and_host_stores.hpp"

namespace crest {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>()>;

void steps_wait_for_nothing(const std::string& name, const MakeOptimizer& make) {
  SCOPED_TRACE(name);
  test::DeviceAndHostStores p;
  auto host_opt = make(), device_opt = make();
  host_opt->attach(p.host, p.host.ops());
  device_opt->attach(p.on_device, p.on_device.ops());
  for (uint64_t step = 0; step < 3; ++step) {
    p.fill(step);
    const int copies = p.device.memory().copies_to_host;
    p.device.value_reads = 0;
    device_opt->step(0.05 * static_cast<double>(step + 1));
    host_opt->step(0.05 * static_cast<double>(step + 1));
    EXPECT_EQ(p.device.value_reads, 0) << "step " << step << " waited for a value";
    EXPECT_EQ(p.device.memory().copies_to_host, copies) << "step " << step << " read memory back";
    EXPECT_TRUE(p.same_values()) << "step " << step;
    EXPECT_TRUE(test::same_state(*device_opt, *host_opt)) << "step " << step;
  }
}

TEST(TrustRatioOnDevice, LarsStepsWaitForNothingInEitherMomentumForm) {
  for (const LarsMomentumForm form : {LarsMomentumForm::torch, LarsMomentumForm::keras})
    steps_wait_for_nothing(form == LarsMomentumForm::torch ? "torch" : "keras", [form] {
      return std::make_unique<Lars>(LarsOptions{.momentum = 0.9,
                                                .trust_coefficient = 0.01,
                                                .eps = 1e-9,
                                                .weight_decay = 0.02,
                                                .momentum_form = form});
    });
}

TEST(TrustRatioOnDevice, LarcStepsWaitForNothingInEitherMode) {
  for (const LarcMode mode : {LarcMode::clip, LarcMode::scale})
    steps_wait_for_nothing(mode == LarcMode::clip ? "clip" : "scale", [mode] {
      return std::make_unique<Larc>(
          std::make_unique<SgdKeras>(0.9),
          LarcOptions{.mode = mode, .trust_coefficient = 0.02, .eps = 1e-9, .weight_decay = 0.01});
    });
}

// The ratios a report reads back are the ones the device used: the host's.
TEST(TrustRatioOnDevice, TheLastRatiosReadBackAreTheHosts) {
  test::DeviceAndHostStores p;
  ParamStore &on_host = p.host, &on_device = p.on_device;
  Lars host_lars({.weight_decay = 0.02}), device_lars({.weight_decay = 0.02});
  Larc host_larc(std::make_unique<SgdKeras>(0.0), {.weight_decay = 0.01}),
      device_larc(std::make_unique<SgdKeras>(0.0), {.weight_decay = 0.01});
  host_lars.attach(on_host, on_host.ops());
  device_lars.attach(on_device, on_device.ops());
  p.fill(0);
  host_lars.step(0.1);
  device_lars.step(0.1);
  EXPECT_EQ(device_lars.last_trust_ratios(), host_lars.last_trust_ratios());
  EXPECT_EQ(device_lars.last_trust_ratios().back(), 1.0);  // zero.weight
  host_larc.attach(on_host, on_host.ops());
  device_larc.attach(on_device, on_device.ops());
  p.fill(0);  // zero.weight zero again
  host_larc.step(0.1);
  device_larc.step(0.1);
  EXPECT_EQ(device_larc.last_factors(), host_larc.last_factors());
  EXPECT_EQ(device_larc.last_factors().back(), 1.0);
}

}  // namespace
}  // namespace crest
