// SGD's weight decay (torch's L2 form inside crest's Keras-form momentum) in float64 on the
// reference backend: an independent per-tensor oracle over three steps with a changing rate, the
// default exclusions (biases and batch-norm tensors of torchvision's names, caught by the
// one-dimensional rule), a user's exact list, and the errors that name the key.
// Nesterov momentum against torch.optim.SGD(nesterov=True)'s form.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/param_slots.hpp"

namespace crest {
namespace {

ParamSlot slot(const std::string& name, Shape shape, bool trainable = true) {
  ParamSlot s = test::flat_slot(name, shape.numel(), trainable);
  s.shape = shape;
  s.spec.shape = shape;
  return s;
}

// torchvision ResNet-50's spellings: a convolution, its batch norm, a downsample's batch norm
// (no `bn` in its name), the classifier.
struct Fixture {
  std::unique_ptr<Backend> backend = make_backend("reference");
  ParamStore params{{slot("conv1.weight", Shape{2, 3, 1, 1}), slot("bn1.weight", Shape{2}),
                     slot("bn1.bias", Shape{2}), slot("bn1.running_mean", Shape{2}, false),
                     slot("layer1.0.downsample.1.weight", Shape{2}), slot("fc.weight", Shape{3, 2}),
                     slot("fc.bias", Shape{3})},
                    DType::f64,
                    *backend};
  double* w(size_t s) { return params.value(s).as<double>(); }
  double* g(size_t s) { return params.grad(s).as<double>(); }
  size_t n(size_t s) { return params.slots()[s].count; }
  size_t at(const char* name) { return static_cast<size_t>(params.find(name)); }

  void fill(std::mt19937_64& gen, bool weights) {
    std::uniform_real_distribution<double> u(-1, 1);
    for (size_t s = 0; s < params.slots().size(); ++s)
      for (size_t i = 0; i < n(s); ++i) {
        if (weights) w(s)[i] = u(gen);
        g(s)[i] = 0.1 * u(gen);
      }
  }
};

// Three steps of v = m v - lr (g + wd w); w = w + v, against the optimizer; `decayed` names the
// tensors that get the wd term.
void expect_steps_match(SgdKeras& sgd, const std::vector<std::string>& decayed_names) {
  Fixture f;
  sgd.attach(f.params, f.params.ops());
  std::mt19937_64 gen(7);
  f.fill(gen, true);
  const size_t slots = f.params.slots().size();
  std::vector<std::vector<double>> w(slots), v(slots);
  for (size_t s = 0; s < slots; ++s) {
    w[s].assign(f.w(s), f.w(s) + f.n(s));
    v[s].assign(f.n(s), 0.0);
  }
  const double m = 0.9, wd = 5e-5 * 256;
  for (const double lr : {0.5, 0.1, 0.02}) {
    for (size_t s = 0; s < slots; ++s) {
      const std::string& name = f.params.slots()[s].name;
      if (!f.params.slots()[s].spec.trainable) continue;
      bool decays = false;
      for (const auto& d : decayed_names) decays = decays || d == name;
      for (size_t i = 0; i < f.n(s); ++i) {
        v[s][i] = m * v[s][i] - lr * (f.g(s)[i] + (decays ? wd * w[s][i] : 0.0));
        w[s][i] += v[s][i];
      }
    }
    sgd.step(lr);
    for (size_t s = 0; s < slots; ++s)
      for (size_t i = 0; i < f.n(s); ++i)
        EXPECT_NEAR(f.w(s)[i], w[s][i], 1e-15) << f.params.slots()[s].name << "[" << i << "]";
    f.fill(gen, false);
  }
}

TEST(SgdWeightDecay, DefaultsDecayOnlyTheMultiDimensionalWeights) {
  SgdKeras sgd(0.9, 5e-5 * 256, weight_decay_exclusions_given(std::nullopt));
  expect_steps_match(sgd, {"conv1.weight", "fc.weight"});
  EXPECT_EQ(sgd.decayed().size(), 2u);
}

TEST(SgdWeightDecay, AGivenListIsExact) {
  // Only the classifier's bias is spared: the batch norms now decay too.
  SgdKeras sgd(0.9, 5e-5 * 256, weight_decay_exclusions_given(std::vector<std::string>{"fc.bias"}));
  expect_steps_match(
      sgd, {"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.downsample.1.weight", "fc.weight"});
}

TEST(SgdWeightDecay, WithoutDecayNothingChangesAndErrorsNameTheKey) {
  SgdKeras plain(0.9);
  expect_steps_match(plain, {});
  EXPECT_TRUE(plain.decayed().empty());
  EXPECT_THROW(SgdKeras(0.9, -1e-4), Error);
  Fixture f;
  SgdKeras typo(0.9, 1e-4, weight_decay_exclusions_given(std::vector<std::string>{"*.bais"}));
  try {
    typo.attach(f.params, f.params.ops());
    ADD_FAILURE() << "a pattern matching nothing was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.weight_decay_exclude: pattern '*.bais'"),
              std::string::npos)
        << e.what();
  }
}

// Nesterov in Keras's form (v = m v - lr d; w = w + m v - lr d, d = g + wd w) at a constant rate
// is torch.optim.SGD(nesterov=True): buf = m buf + d; w = w - lr (d + m buf), v being -lr buf.
// The oracle is torch's form, so the two forms are checked against each other too.
TEST(SgdNesterov, AtAConstantRateItIsTorchsNesterov) {
  Fixture f;
  SgdKeras sgd(0.9, 5e-5 * 256, weight_decay_exclusions_given(std::nullopt), true);
  sgd.attach(f.params, f.params.ops());
  std::mt19937_64 gen(11);
  f.fill(gen, true);
  const size_t slots = f.params.slots().size();
  std::vector<std::vector<double>> w(slots), buf(slots);
  for (size_t s = 0; s < slots; ++s) {
    w[s].assign(f.w(s), f.w(s) + f.n(s));
    buf[s].assign(f.n(s), 0.0);
  }
  const double m = 0.9, wd = 5e-5 * 256, lr = 0.1;
  for (int step = 0; step < 3; ++step) {
    for (size_t s = 0; s < slots; ++s) {
      const std::string& name = f.params.slots()[s].name;
      if (!f.params.slots()[s].spec.trainable) continue;
      const bool decays = name == "conv1.weight" || name == "fc.weight";
      for (size_t i = 0; i < f.n(s); ++i) {
        const double d = f.g(s)[i] + (decays ? wd * w[s][i] : 0.0);
        buf[s][i] = m * buf[s][i] + d;
        w[s][i] -= lr * (d + m * buf[s][i]);
      }
    }
    sgd.step(lr);
    for (size_t s = 0; s < slots; ++s)
      for (size_t i = 0; i < f.n(s); ++i)
        EXPECT_NEAR(f.w(s)[i], w[s][i], 1e-14) << f.params.slots()[s].name << "[" << i << "]";
    f.fill(gen, false);
  }
  EXPECT_THROW(SgdKeras(0.0, 0.0, {}, true), Error);  // torch refuses it too
}

}  // namespace
}  // namespace crest
