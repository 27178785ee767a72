// Gradient checks of the reference dense (fully connected) and channel-concat kernels.
#include <gtest/gtest.h>

#include "backends/reference/reference_backend.hpp"
#include "gradcheck/gradcheck_util.hpp"

namespace crest {
namespace {

using gradcheck::dot;
using gradcheck::expect_gradient;
using gradcheck::poisoned;
using gradcheck::random_vector;

// L = sum(r * (x W^T + b)); checks dL/dx, dL/dW and dL/db.
void check_dense(bool bias) {
  DenseDesc d;
  d.n = 3;
  d.in_features = 5;
  d.out_features = 4;
  d.bias = bias;
  d.dtype = DType::f64;
  auto kernel = make_reference_backend()->dense(d);
  const size_t src_count = 15, w_count = 20, b_count = 4, dst_count = 12;
  std::vector<double> x = random_vector(src_count, 21);
  std::vector<double> w = random_vector(w_count, 22);
  std::vector<double> b = random_vector(b_count, 23);
  const std::vector<double> r = random_vector(dst_count, 24);
  std::vector<double> y(dst_count);
  auto loss = [&] {
    kernel->forward(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), nullptr);
    return dot(r, y);
  };
  std::vector<double> dx = poisoned(src_count), dw = poisoned(w_count), db = poisoned(b_count);
  kernel->backward_data(r.data(), w.data(), dx.data(), nullptr);
  kernel->backward_weights(x.data(), r.data(), dw.data(), bias ? db.data() : nullptr, nullptr);
  expect_gradient("d src", x, dx, loss);
  expect_gradient("d weights", w, dw, loss);
  if (bias) expect_gradient("d bias", b, db, loss);
}

TEST(GradCheck, Dense) { check_dense(true); }
TEST(GradCheck, DenseNoBias) { check_dense(false); }

// Three inputs of 1, 3 and 2 channels; the middle one asks for no gradient (null diff_src).
TEST(GradCheck, ConcatChannelsSkipsNullGradient) {
  const std::vector<Shape> shapes{{2, 1, 3, 2}, {2, 3, 3, 2}, {2, 2, 3, 2}};
  std::vector<MemFormat> formats;
  for (const Shape& s : shapes) formats.push_back(plain_format(s, DType::f64));
  auto kernel = make_reference_backend()->concat(formats);
  ASSERT_EQ(kernel->dst_format().shape, (Shape{2, 6, 3, 2}));

  std::vector<std::vector<double>> xs;
  for (size_t i = 0; i < shapes.size(); ++i)
    xs.push_back(random_vector(static_cast<size_t>(shapes[i].numel()), 31 + i));
  const std::vector<double> r = random_vector(72, 35);
  std::vector<double> y(72);
  auto loss = [&] {
    kernel->forward({xs[0].data(), xs[1].data(), xs[2].data()}, y.data());
    return dot(r, y);
  };
  std::vector<double> d0 = poisoned(xs[0].size()), d2 = poisoned(xs[2].size());
  const std::vector<double> untouched(xs[1].size(), -5.0);
  std::vector<double> d1 = untouched;
  kernel->backward(r.data(), {d0.data(), nullptr, d2.data()});
  expect_gradient("d src 0", xs[0], d0, loss);
  expect_gradient("d src 2", xs[2], d2, loss);
  EXPECT_EQ(d1, untouched);
}

}  // namespace
}  // namespace crest
