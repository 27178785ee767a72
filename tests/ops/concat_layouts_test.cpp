// A concatenation whose producers deliver layouts the backend cannot concatenate together (a
// channels-last graph input beside a plain one: the reference and cuda backends concatenate one
// layout at a time): the concat layer asks for every input in the layout most of their bytes
// have, the compile step reorders the others, and the values land where the channels say, on
// every host backend.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

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

// The format column of the summary's line for layer `name`.
std::string format_of(const Executor& ex, const std::string& name) {
  std::istringstream lines(ex.summary());
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string layer, kind, shape, format;
    words >> layer >> kind;
    if (layer != name) continue;
    // The output shape is printed with spaces ("[2, 5, 3, 4]"): the format follows its "]".
    std::getline(words, shape, ']');
    words >> format;
    return format;
  }
  return "";
}

// `a` channels-last with a_channels, `b` plain with b_channels, concatenated.
void expect_concatenation(int64_t a_channels, int64_t b_channels, const char* reference_layout) {
  SCOPED_TRACE(std::to_string(a_channels) + " channels-last + " + std::to_string(b_channels) +
               " plain channels");
  Graph g;
  const ValueId a = g.input("a", Shape{a_channels, 3, 4}, Layout::channels_last);
  const ValueId b = g.input("b", Shape{b_channels, 3, 4});
  const ValueId out = g.add("concat", layers::concat(), {a, b});
  g.mark_output(out);
  for (const std::string& name : test::host_backend_names()) {
    SCOPED_TRACE(name);
    auto backend = make_backend(name);
    CompileOptions o;
    o.batch = kBatch;
    Executor ex(g, *backend, o);
    if (name == "reference") {
      EXPECT_EQ(format_of(ex, "concat"), reference_layout) << ex.summary();
    }
    auto* av = ex.input("a").as<float>();  // channels-last: [n, s, c]
    auto* bv = ex.input("b").as<float>();  // plain: [n, c, s]
    for (int64_t n = 0; n < kBatch; ++n)
      for (int64_t s = 0; s < kSpatial; ++s) {
        for (int64_t c = 0; c < a_channels; ++c)
          av[(n * kSpatial + s) * a_channels + c] = value_at(0, n, c, s);
        for (int64_t c = 0; c < b_channels; ++c)
          bv[(n * b_channels + c) * kSpatial + s] = value_at(1, n, c, s);
      }
    ex.forward();
    const TensorView y = ex.output(out);
    const int64_t channels = a_channels + b_channels;
    ASSERT_EQ(y.shape(), (Shape{kBatch, channels, 3, 4}));
    for (int64_t n = 0; n < kBatch; ++n)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t s = 0; s < kSpatial; ++s)
          ASSERT_EQ(y.as<float>()[(n * channels + c) * kSpatial + s],
                    c < a_channels ? value_at(0, n, c, s) : value_at(1, n, c - a_channels, s))
              << "n " << n << " c " << c << " s " << s;
  }
}

TEST(ConcatLayouts, InputsOfMixedLayoutsMeetInTheLayoutMostOfTheirBytesHave) {
  EXPECT_FALSE(make_backend("reference")
                   ->supports({plain_format(Shape{2, 2, 3, 4}, DType::f32, Layout::channels_last),
                               plain_format(Shape{2, 3, 3, 4}, DType::f32)}));
  expect_concatenation(2, 3, "plain");
  expect_concatenation(6, 1, "channels_last");
}

}  // namespace
}  // namespace crest
