// The engine session (crest/engine/session.hpp): each purpose's compile flags, the precision's
// dtypes, and a session's executor is the one those options compile.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "crest/core/error.hpp"
#include "crest/engine/session.hpp"
#include "support/counting_backend.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

const Backend& host() {
  static const std::unique_ptr<Backend> reference = make_backend("reference");
  return *reference;
}

TEST(EngineSession, EachPurposeHasItsCompileFlags) {
  SessionOptions o;
  o.batch = 3;
  o.seed = 7;
  CompileOptions c = compile_options(o, host());
  EXPECT_TRUE(c.training);
  EXPECT_TRUE(c.loss);
  EXPECT_EQ(c.batch, 3);
  EXPECT_EQ(c.seed, 7u);
  o.purpose = Purpose::inference;  // predict, bench infer: samples without targets
  c = compile_options(o, host());
  EXPECT_FALSE(c.training);
  EXPECT_FALSE(c.loss);
  o.purpose = Purpose::weights;  // export: the losses stay, nothing trains
  c = compile_options(o, host());
  EXPECT_FALSE(c.training);
  EXPECT_TRUE(c.loss);
}

TEST(EngineSession, PrecisionGivesTheMasterAndHalfTypes) {
  SessionOptions o;
  EXPECT_EQ(compile_options(o, host()).dtype, DType::f32);
  EXPECT_FALSE(compile_options(o, host()).half.has_value());
  o.precision = Precision::float64;
  EXPECT_EQ(compile_options(o, host()).dtype, DType::f64);
  o.precision = Precision::bf16;
  EXPECT_EQ(compile_options(o, host()).dtype, DType::f32);  // float32 master weights
  EXPECT_EQ(compile_options(o, host()).half, DType::bf16);
  EXPECT_TRUE(compile_options(o, host()).half_inputs);  // callers narrow their batch (BatchFeed)
  o.precision = Precision::fp16;
  EXPECT_EQ(compile_options(o, host()).half, DType::f16);
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
  Executor want(m.graph, *plain, compile_options(o, host()));
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

// A backend that knows its own memory (a GPU's free memory) limits the compiled program in place
// of the node's share, unless the user set the limit (crest.max_memory_gb); a model larger than
// it is refused before its activations are allocated, naming where the limit came from.
TEST(EngineSession, ABackendsOwnMemoryLimitsWhatItCompiles) {
  const test::SmallModel m = test::branchy_model();
  test::CountingBackend device(/*pretend_device=*/true);
  device.capacity = {4096, "pretend device 0 (4.0 KiB free)"};
  SessionOptions o;
  o.batch = 2;
  o.memory_limit = size_t(1) << 40;
  o.memory_limit_source = "this rank's share of the node's memory";
  const CompileOptions c = compile_options(o, device);
  EXPECT_EQ(c.memory_limit, 4096u);
  EXPECT_EQ(c.memory_limit_source, device.capacity.source);
  try {
    Executor ex(m.graph, device, c);
    FAIL() << "compiled beyond the device's memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_EQ(
        std::string(e.what()).rfind(device.capacity.source + ": the compiled program needs", 0), 0u)
        << e.what();
  }
  o.memory_limit_set = true;
  EXPECT_EQ(compile_options(o, device).memory_limit, o.memory_limit);
  o.memory_limit_set = false;
  device.capacity = {};
  EXPECT_EQ(compile_options(o, device).memory_limit_source, o.memory_limit_source);
}

}  // namespace
}  // namespace crest
