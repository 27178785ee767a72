// LARS's and LARC's trust ratios on a device: the tensors' norms stay in the device's memory
// (VectorOps::range_sum_squares_into) and each update computes its ratio where it runs
// (lars_trust_update, sgd_keras_trust_update, larc_trust_rescale), so an optimizer step hands no
// value back to the host. On the pretend device (test::CountingBackend), whose VectorOps count
// every call that returns a value, the weights and the optimizer state after each step are the
// host's to the bit, in every momentum form and LARC mode, with excluded tensors and a tensor
// of zeros (ratio 1; LARC leaves its gradient alone) among them.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crest/optim/larc.hpp"
#include "crest/optim/lars.hpp"
#include "support/counting_backend.hpp"
#include "support/param_slots.hpp"

namespace crest {
namespace {

using test::flat_slot;

std::vector<ParamSlot> slots() {
  return {flat_slot("conv1.weight", 6), flat_slot("conv1.bias", 3),
          flat_slot("bn1.running_mean", 4, false), flat_slot("fc1.weight", 5),
          flat_slot("zero.weight", 2)};
}

// Step `step`'s gradients (and at step 0 the weights), the same on both stores.
void fill(ParamStore& host, ParamStore& device, uint64_t step) {
  std::mt19937_64 gen(step + 1);
  std::uniform_real_distribution<double> u(-1, 1);
  for (size_t s = 0; s < host.slots().size(); ++s) {
    const bool zero = host.slots()[s].name == "zero.weight";
    for (size_t i = 0; i < host.slots()[s].count; ++i) {
      if (step == 0) host.value(s).as<double>()[i] = zero ? 0.0 : u(gen);
      if (host.slots()[s].spec.trainable) host.grad(s).as<double>()[i] = 0.1 * u(gen);
    }
  }
  std::memcpy(device.values(), host.values(), host.bytes());
  std::memcpy(device.grads(), host.grads(), host.trainable_bytes());
}

bool same_state(Optimizer& a, Optimizer& b) {
  const auto sa = a.state(), sb = b.state();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (std::memcmp(sa[i].second->data(), sb[i].second->data(), sa[i].second->bytes()) != 0)
      return false;
  return true;
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>()>;

void steps_wait_for_nothing(const std::string& name, const MakeOptimizer& make) {
  SCOPED_TRACE(name);
  auto reference = make_backend("reference");
  test::CountingBackend device(/*pretend_device=*/true);
  ParamStore on_host(slots(), DType::f64, *reference), on_device(slots(), DType::f64, device);
  auto host_opt = make(), device_opt = make();
  host_opt->attach(on_host, on_host.ops());
  device_opt->attach(on_device, on_device.ops());
  for (uint64_t step = 0; step < 3; ++step) {
    fill(on_host, on_device, step);
    const int copies = device.memory().copies_to_host;
    device.value_reads = 0;
    device_opt->step(0.05 * static_cast<double>(step + 1));
    host_opt->step(0.05 * static_cast<double>(step + 1));
    EXPECT_EQ(device.value_reads, 0) << "step " << step << " waited for a value";
    EXPECT_EQ(device.memory().copies_to_host, copies) << "step " << step << " read memory back";
    EXPECT_EQ(std::memcmp(on_device.values(), on_host.values(), on_host.bytes()), 0)
        << "step " << step;
    EXPECT_TRUE(same_state(*device_opt, *host_opt)) << "step " << step;
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
  auto reference = make_backend("reference");
  test::CountingBackend device(/*pretend_device=*/true);
  ParamStore on_host(slots(), DType::f64, *reference), on_device(slots(), DType::f64, device);
  Lars host_lars({.weight_decay = 0.02}), device_lars({.weight_decay = 0.02});
  Larc host_larc(std::make_unique<SgdKeras>(0.0), {.weight_decay = 0.01}),
      device_larc(std::make_unique<SgdKeras>(0.0), {.weight_decay = 0.01});
  host_lars.attach(on_host, on_host.ops());
  device_lars.attach(on_device, on_device.ops());
  fill(on_host, on_device, 0);
  host_lars.step(0.1);
  device_lars.step(0.1);
  EXPECT_EQ(device_lars.last_trust_ratios(), host_lars.last_trust_ratios());
  EXPECT_EQ(device_lars.last_trust_ratios().back(), 1.0);  // zero.weight
  host_larc.attach(on_host, on_host.ops());
  device_larc.attach(on_device, on_device.ops());
  fill(on_host, on_device, 0);  // zero.weight zero again
  host_larc.step(0.1);
  device_larc.step(0.1);
  EXPECT_EQ(device_larc.last_factors(), host_larc.last_factors());
  EXPECT_EQ(device_larc.last_factors().back(), 1.0);
}

}  // namespace
}  // namespace crest
