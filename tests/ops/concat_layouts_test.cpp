// A concatenation whose producers deliver a layout the backend cannot concatenate (a
// channels-last graph input beside a plain one: the reference backend concatenates plain tensors
// only, the cuda backend one layout at a time): the concat layer asks for its inputs plain, the
// compile step reorders, and the values land where the channels say, on every host backend.
#include <gtest/gtest.h>

#include "crest/graph/executor.hpp"
#include "crest/layers/shape_ops.hpp"
#include "support/host_backends.hpp"

namespace crest {
namespace {

constexpr int64_t kBatch = 2, kSpatial = 12;  // [3, 4]

// The value of channel c at (n, s) of input `which`.
float value_at(int64_t which, int64_t n, int64_t c, int64_t s) {
  return static_cast<float>(which * 1000 + n * 100 + c * 20 + s);
}

TEST(ConcatLayouts, ProducersOfLayoutsTheBackendCannotConcatenateAreHandedOverPlain) {
  Graph g;
  const ValueId a = g.input("a", Shape{2, 3, 4}, Layout::channels_last);
  const ValueId b = g.input("b", Shape{3, 3, 4});
  const ValueId out = g.add("concat", layers::concat(), {a, b});
  g.mark_output(out);
  EXPECT_FALSE(make_backend("reference")
                   ->supports({plain_format(Shape{2, 2, 3, 4}, DType::f32, Layout::channels_last),
                               plain_format(Shape{2, 3, 3, 4}, DType::f32)}));
  for (const std::string& name : test::host_backend_names()) {
    SCOPED_TRACE(name);
    auto backend = make_backend(name);
    CompileOptions o;
    o.batch = kBatch;
    Executor ex(g, *backend, o);
    auto* av = ex.input("a").as<float>();  // channels-last: [n, s, c]
    auto* bv = ex.input("b").as<float>();  // plain: [n, c, s]
    for (int64_t n = 0; n < kBatch; ++n)
      for (int64_t s = 0; s < kSpatial; ++s) {
        for (int64_t c = 0; c < 2; ++c) av[(n * kSpatial + s) * 2 + c] = value_at(0, n, c, s);
        for (int64_t c = 0; c < 3; ++c) bv[(n * 3 + c) * kSpatial + s] = value_at(1, n, c, s);
      }
    ex.forward();
    const TensorView y = ex.output(out);
    ASSERT_EQ(y.shape(), (Shape{kBatch, 5, 3, 4}));
    for (int64_t n = 0; n < kBatch; ++n)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t s = 0; s < kSpatial; ++s)
          ASSERT_EQ(y.as<float>()[(n * 5 + c) * kSpatial + s],
                    c < 2 ? value_at(0, n, c, s) : value_at(1, n, c - 2, s))
              << "n " << n << " c " << c << " s " << s;
  }
}

}  // namespace
}  // namespace crest
