// LARS and LARC against PyTorch in float64 (tests/fixtures/lars_parity.safetensors, written by
// make_lars_parity.py from the published formulas): three steps on fixed gradients with a
// changing learning rate, on tensors that include excluded ones (a bias, a batch-norm scale and
// shift), a zero tensor and a zero gradient. crest's float64 reference backend must reproduce
// every tensor's update to 1e-6 relative; LARC over AdamW must take LARC over Adam's steps
// (apex's LARC takes the weight decay over from its base).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "crest/data/safetensors.hpp"
#include "crest/optim/larc.hpp"
#include "crest/optim/lars.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

// The fixture's settings (checked against its metadata below).
constexpr double kEta = 0.02, kEps = 1e-8, kWd = 5e-3, kMomentum = 0.9, kAdamEps = 1e-8;
const std::vector<std::string> kNames{"conv1.weight", "fc1.weight",      "conv1.bias",
                                      "zero.weight",  "block.bn.weight", "block.bn.bias",
                                      "head.weight"};

LarsExclusions exclusions() {
  return {.patterns = {"*.bias", "*.bn.weight"}, .every_pattern_matches = true};
}

std::unique_ptr<Optimizer> make(const std::string& c) {
  if (c == "lars")
    return std::make_unique<Lars>(LarsOptions{.momentum = kMomentum,
                                              .trust_coefficient = kEta,
                                              .eps = kEps,
                                              .weight_decay = kWd,
                                              .exclude = exclusions()});
  const LarcMode mode = c.find("clip") != std::string::npos ? LarcMode::clip : LarcMode::scale;
  std::unique_ptr<Optimizer> base;
  if (c.ends_with("sgd"))
    base = std::make_unique<SgdKeras>(kMomentum);
  else
    base = std::make_unique<Adam>(0.9, 0.999, kAdamEps, 0.0, c.ends_with("adamw"));
  return std::make_unique<Larc>(std::move(base), LarcOptions{.mode = mode,
                                                             .trust_coefficient = kEta,
                                                             .eps = kEps,
                                                             .weight_decay = kWd,
                                                             .exclude = exclusions()});
}

double f64_at(const SafetensorsTensor& t, size_t i) {
  double v;
  std::memcpy(&v, t.data + i * 8, 8);
  return v;
}

// Runs `optimizer` over the fixture's steps; returns the worst relative update error over the
// tensors of `expected_case`.
double worst_update_error(const SafetensorsFile& fx, Optimizer& optimizer,
                          const std::string& expected_case) {
  std::vector<ParamSlot> slots;
  for (const std::string& name : kNames) {
    ParamSlot s;
    s.name = s.spec.name = name;
    s.shape = s.spec.shape = fx.at("init." + name).crest_shape();
    s.spec.trainable = true;
    slots.push_back(s);
  }
  auto backend = make_backend("reference");
  ParamStore ps(slots, DType::f64, *backend);
  for (size_t s = 0; s < slots.size(); ++s)
    fx.read_into("init." + kNames[s], DType::f64, ps.slots()[s].shape, ps.value(s).data());
  optimizer.attach(ps, ps.ops());
  const SafetensorsTensor& lr = fx.at("lr");
  for (size_t step = 0; step < 3; ++step) {
    for (size_t s = 0; s < slots.size(); ++s)
      fx.read_into("grad" + std::to_string(step) + "." + kNames[s], DType::f64, ps.slots()[s].shape,
                   ps.grad(s).data());
    optimizer.step(f64_at(lr, step));
  }
  double worst = 0;
  for (size_t s = 0; s < slots.size(); ++s) {
    const SafetensorsTensor& init = fx.at("init." + kNames[s]);
    const SafetensorsTensor& want = fx.at(expected_case + "." + kNames[s]);
    const double* got = ps.value(s).as<double>();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < ps.slots()[s].count; ++i) {
      const double ref_update = f64_at(want, i) - f64_at(init, i);
      diff = std::max(diff, std::abs((got[i] - f64_at(init, i)) - ref_update));
      scale = std::max(scale, std::abs(ref_update));
    }
    EXPECT_GT(scale, 1e-4) << kNames[s] << " does not move in " << expected_case;
    EXPECT_LE(diff / scale, 1e-6) << expected_case << " " << kNames[s];
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

TEST(LarsParity, FixtureSettingsAreTheTests) {
  SafetensorsFile fx(test::source_path("tests/fixtures/lars_parity.safetensors"));
  const auto& m = fx.metadata();
  EXPECT_EQ(std::stod(m.at("trust_coefficient_lars")), kEta);
  EXPECT_EQ(std::stod(m.at("trust_coefficient_larc")), kEta);
  EXPECT_EQ(std::stod(m.at("eps")), kEps);
  EXPECT_EQ(std::stod(m.at("weight_decay")), kWd);
  EXPECT_EQ(std::stod(m.at("momentum")), kMomentum);
  EXPECT_EQ(std::stod(m.at("adam_eps")), kAdamEps);
  EXPECT_EQ(m.at("exclude"), "[\"*.bias\", \"*.bn.weight\"]");
  EXPECT_EQ(std::stoi(m.at("steps")), 3);
}

TEST(LarsParity, ThreeStepsMatchFloat64PytorchToOneInAMillion) {
  SafetensorsFile fx(test::source_path("tests/fixtures/lars_parity.safetensors"));
  for (const char* c :
       {"lars", "larc_clip_sgd", "larc_scale_sgd", "larc_clip_adam", "larc_scale_adam"}) {
    auto optimizer = make(c);
    const double worst = worst_update_error(fx, *optimizer, c);
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", worst);
    RecordProperty(std::string(c) + "_worst_relative_update_error", text);
  }
}

// apex's LARC sets its base's weight decay to 0 and applies it itself, so an AdamW base (whose
// decay would be decoupled) steps exactly as an Adam base.
TEST(LarsParity, LarcOverAdamwTakesLarcOverAdamsSteps) {
  SafetensorsFile fx(test::source_path("tests/fixtures/lars_parity.safetensors"));
  for (const char* mode : {"clip", "scale"}) {
    auto optimizer = make(std::string("larc_") + mode + "_adamw");
    worst_update_error(fx, *optimizer, std::string("larc_") + mode + "_adam");
  }
}

}  // namespace
}  // namespace crest
