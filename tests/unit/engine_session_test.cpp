// The engine session (crest/engine/session.hpp): each purpose's compile flags, the precision's
// dtypes, and a session's executor is the one those options compile.
#include <gtest/gtest.h>

#include <cstring>

#include "crest/core/error.hpp"
#include "crest/engine/session.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

TEST(EngineSession, EachPurposeHasItsCompileFlags) {
  SessionOptions o;
  o.batch = 3;
  o.seed = 7;
  CompileOptions c = compile_options(o);
  EXPECT_TRUE(c.training);
  EXPECT_TRUE(c.loss);
  EXPECT_EQ(c.batch, 3);
  EXPECT_EQ(c.seed, 7u);
  o.purpose = Purpose::inference;  // predict, bench infer: samples without targets
  c = compile_options(o);
  EXPECT_FALSE(c.training);
  EXPECT_FALSE(c.loss);
  o.purpose = Purpose::weights;  // export: the losses stay, nothing trains
  c = compile_options(o);
  EXPECT_FALSE(c.training);
  EXPECT_TRUE(c.loss);
}

TEST(EngineSession, PrecisionGivesTheMasterAndHalfTypes) {
  SessionOptions o;
  EXPECT_EQ(compile_options(o).dtype, DType::f32);
  EXPECT_FALSE(compile_options(o).half.has_value());
  o.precision = Precision::float64;
  EXPECT_EQ(compile_options(o).dtype, DType::f64);
  o.precision = Precision::bf16;
  EXPECT_EQ(compile_options(o).dtype, DType::f32);  // float32 master weights
  EXPECT_EQ(compile_options(o).half, DType::bf16);
  EXPECT_TRUE(compile_options(o).half_inputs);  // callers narrow their batch (BatchFeed)
  o.precision = Precision::fp16;
  EXPECT_EQ(compile_options(o).half, DType::f16);
}

TEST(EngineSession, CompilesWhatItsOptionsSayOnTheNamedBackend) {
  const test::SmallModel m = test::branchy_model();
  SessionOptions o;
  o.backend = "reference";
  o.threads = 3;
  o.batch = 2;
  o.seed = 11;
  const Session s(m.graph, o);
  EXPECT_EQ(s.backend().name(), "reference");
  EXPECT_EQ(s.threads(), 1) << "the reference backend runs one thread, whatever is asked";
  EXPECT_GE(s.compile_seconds(), 0);
  auto plain = make_backend("reference");
  Executor want(m.graph, *plain, compile_options(o));
  ASSERT_EQ(s.executor().params().bytes(), want.params().bytes());
  EXPECT_EQ(
      std::memcmp(s.executor().params().values(), want.params().values(), want.params().bytes()), 0)
      << "the seed's initial weights";
  EXPECT_EQ(s.executor().input("x").shape()[0], 2);
  o.threads = 0;
  EXPECT_EQ(Session(m.graph, o).threads(), 0) << "threads left at the backend's default";
}

TEST(EngineSession, AnUnknownBackendIsRefusedByName) {
  SessionOptions o;
  o.backend = "no-such-backend";
  try {
    const Session s(test::branchy_model().graph, o);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-backend"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crest
