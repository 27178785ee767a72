// Gradient checks of the reference activations. Backward computes from the output only, which is
// exactly what the check exercises: analytic = backward(forward(x), r).
#include <gtest/gtest.h>

#include "backends/reference/reference_backend.hpp"
#include "gradcheck/gradcheck_util.hpp"

namespace crest {
namespace {

using gradcheck::dot;
using gradcheck::expect_gradient;

// L = sum(r * f(x)); checks dL/dx out of place, then that in-place forward and backward agree.
void check_eltwise(EltwiseDesc e, uint64_t seed = 11) {
  const Shape shape{2, 3, 4, 5};
  const auto count = static_cast<size_t>(shape.numel());
  auto kernel = make_reference_backend()->eltwise(e, plain_format(shape, DType::f64));
  // Kinks (ReLU at 0) are kept well outside the step.
  std::vector<double> x = gradcheck::random_away_from_zero(count, seed, 1e-2);
  for (double& v : x) v *= 3.0;  // reach the saturated parts of tanh and sigmoid too
  const std::vector<double> r = gradcheck::random_vector(count, seed + 1);
  std::vector<double> y(count);
  auto loss = [&] {
    kernel->forward(x.data(), y.data());
    return dot(r, y);
  };
  loss();
  std::vector<double> dx = gradcheck::poisoned(count);
  kernel->backward(y.data(), r.data(), dx.data());
  expect_gradient("d src", x, dx, loss);

  loss();  // y as of the unperturbed x again (the check leaves the last perturbation in y)
  std::vector<double> inplace = x;
  kernel->forward(inplace.data(), inplace.data());
  EXPECT_EQ(inplace, y);
  std::vector<double> grad = r;
  kernel->backward(inplace.data(), grad.data(), grad.data());
  EXPECT_EQ(grad, dx);
}

TEST(GradCheck, EltwiseRelu) { check_eltwise({EltwiseKind::relu, 0.f, 0.f}); }
TEST(GradCheck, EltwiseReluNegativeSlope) { check_eltwise({EltwiseKind::relu, 0.1f, 0.f}); }
TEST(GradCheck, EltwiseLeakyRelu) { check_eltwise({EltwiseKind::leaky_relu, 0.2f, 0.f}); }
TEST(GradCheck, EltwiseTanh) { check_eltwise({EltwiseKind::tanh, 0.f, 0.f}); }
TEST(GradCheck, EltwiseSigmoid) { check_eltwise({EltwiseKind::sigmoid, 0.f, 0.f}); }
TEST(GradCheck, EltwiseLinear) { check_eltwise({EltwiseKind::linear, -0.7f, 2.f}); }

}  // namespace
}  // namespace crest
