// An update's per-step values (the rate, the step count for Adam's and LAMB's bias correction,
// LAMB's gradient divisor) live in the backend's memory (VectorOps::UpdateStep, written by
// Optimizer::stage_update through StagedValues), so every optimizer hands its update kernels the
// same arguments every step: what a captured update (a CUDA graph) replays. On the pretend device,
// with the rate changing every step: no update kernel is handed a rate or count by the host,
// every step's kernel calls equal the first step's argument for argument, each step writes its
// values once per optimizer (MemoryResource::write_values: no copy from the host to wait for),
// and the weights and the optimizer state are the reference backend's to the bit.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crest/optim/lamb.hpp"
#include "crest/optim/larc.hpp"
#include "crest/optim/lars.hpp"
#include "support/device_and_host_stores.hpp"

namespace crest {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>()>;

// `staged`: the optimizers that write their own step values (a wrapper and its base: 2).
void same_arguments_every_step(const std::string& name, const MakeOptimizer& make, int staged = 1) {
  SCOPED_TRACE(name);
  test::DeviceAndHostStores p;
  auto host_opt = make(), device_opt = make();
  host_opt->attach(p.host, p.host.ops());
  device_opt->attach(p.on_device, p.on_device.ops());
  std::vector<std::vector<std::string>> calls;
  const auto& noted = p.device.updates.at_step;
  for (uint64_t step = 0; step < 3; ++step) {
    p.fill(step);
    const size_t before = noted.size();
    const int written = p.device.memory().values_written;
    const int copies = p.device.memory().copies_to_device + p.device.memory().copies_started;
    const double lr = 0.05 * static_cast<double>(step + 1);
    device_opt->step(lr);
    host_opt->step(lr);
    calls.emplace_back(noted.begin() + static_cast<std::ptrdiff_t>(before), noted.end());
    EXPECT_FALSE(calls.back().empty()) << "step " << step << " queued no update kernel";
    EXPECT_EQ(p.device.memory().values_written - written, staged) << "step " << step;
    EXPECT_EQ(p.device.memory().copies_to_device + p.device.memory().copies_started, copies)
        << "step " << step << " copied from the host";
    EXPECT_TRUE(p.same_values()) << "step " << step;
    EXPECT_TRUE(test::same_state(*device_opt, *host_opt)) << "step " << step;
  }
  EXPECT_EQ(p.device.updates.host_rated, 0) << "an update kernel was handed its rate by the host";
  EXPECT_EQ(calls[1], calls[0]);
  EXPECT_EQ(calls[2], calls[0]);
}

TEST(StagedUpdateStep, SgdAndAdamTakeTheSameArgumentsEveryStep) {
  same_arguments_every_step("sgd", [] { return std::make_unique<SgdKeras>(0.9); });
  same_arguments_every_step("sgd, nesterov, weight decay", [] {
    return std::make_unique<SgdKeras>(0.9, 0.01, LarsExclusions{}, /*nesterov=*/true);
  });
  for (const bool decoupled : {false, true})
    same_arguments_every_step(decoupled ? "adamw" : "adam", [decoupled] {
      return std::make_unique<Adam>(0.9, 0.999, 1e-8, 0.01, decoupled);
    });
}

TEST(StagedUpdateStep, LarsAndLarcTakeTheSameArgumentsEveryStep) {
  for (const LarsMomentumForm form : {LarsMomentumForm::torch, LarsMomentumForm::keras})
    same_arguments_every_step(form == LarsMomentumForm::torch ? "lars torch" : "lars keras",
                              [form] {
                                return std::make_unique<Lars>(LarsOptions{.momentum = 0.9,
                                                                          .trust_coefficient = 0.01,
                                                                          .weight_decay = 0.02,
                                                                          .momentum_form = form});
                              });
  same_arguments_every_step(
      "larc over adam",
      [] {
        return std::make_unique<Larc>(std::make_unique<Adam>(0.9, 0.999, 1e-8, 0.0, false),
                                      LarcOptions{.mode = LarcMode::clip, .weight_decay = 0.01});
      },
      2);
}

// The global-norm clip makes the divisor change every step: it is a step value too.
TEST(StagedUpdateStep, LambTakesTheSameArgumentsEveryStepWithAndWithoutTrustRatios) {
  for (const double decay : {0.0, 0.01})
    same_arguments_every_step(decay > 0 ? "lamb" : "lamb without weight decay", [decay] {
      return std::make_unique<Lamb>(LambOptions{.weight_decay = decay, .max_grad_norm = 0.05});
    });
}

}  // namespace
}  // namespace crest
