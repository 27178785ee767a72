// Optimizer::state_buffers: what attach() will allocate, known before the model is compiled so
// that the memory check counts it (TrainingSession), for every registered optimizer (LARC over
// two bases), with and without gradient accumulation and the gradient lag.
#include <gtest/gtest.h>

#include <string>

#include "crest/graph/executor.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

OptimizerConfig config_of(const std::string& name, const std::string& larc_base = "SGD") {
  OptimizerConfig o;
  o.name = name;
  o.larc_base = larc_base;
  if (find_optimizer_type(name).wraps)
    if (const auto& defaults = find_optimizer_type(larc_base).set_defaults) defaults(o);
  if (const auto& defaults = find_optimizer_type(name).set_defaults) defaults(o);
  return o;
}

TEST(OptimizerStateBuffers, AreWhatAttachAllocates) {
  const test::SmallModel m = test::branchy_model();
  auto backend = make_backend("reference");
  CompileOptions co;
  co.batch = 2;
  Executor ex(m.graph, *backend, co);
  std::vector<OptimizerConfig> configs;
  for (const std::string& name : optimizer_names()) configs.push_back(config_of(name));
  configs.push_back(config_of("LARC", "Adam"));
  for (const OptimizerConfig& c : configs)
    for (const int accumulation : {1, 2})
      for (const bool lag : {false, true}) {
        const std::string what = c.name + "(" + c.larc_base + ") accumulation " +
                                 std::to_string(accumulation) + (lag ? " lag" : "");
        std::unique_ptr<Optimizer> opt = make_optimizer(c);
        const int predicted = opt->state_buffers(accumulation, lag);
        opt->attach(ex.params(), ex.vec(), accumulation, lag);
        EXPECT_EQ(static_cast<size_t>(predicted), opt->state().size()) << what;
        for (const auto& [name, buffer] : opt->state())
          EXPECT_LE(buffer->bytes(), ex.params().trainable_bytes() + ParamStore::kSidebandBytes)
              << what << " " << name;
      }
}

// The memory check counts them: a limit the program and its parameters fit under, but not their
// optimizer state, is refused naming the state.
TEST(OptimizerStateBuffers, CountAgainstTheMemoryLimit) {
  const test::SmallModel m = test::branchy_model();
  auto backend = make_backend("reference");
  CompileOptions co;
  co.batch = 2;
  const Executor plain(m.graph, *backend, co);
  const size_t without_state = plain.plan().arena_bytes + 2 * plain.params().bytes();
  co.memory_limit = without_state + 16;
  co.memory_limit_source = "a test's limit";
  EXPECT_NO_THROW(Executor(m.graph, *backend, co));
  co.beside.trainable_copies = 2;  // Adam's moments
  try {
    Executor ex(m.graph, *backend, co);
    FAIL() << "the optimizer's state was not counted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(", optimizer state "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crest
