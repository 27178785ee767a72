// Executor::planned_memory: the compiled program's activations and parameters with what its
// session keeps beside it (CompileOptions::beside), each part counted from the program's own
// figures, and the memory check refusing the sum before anything is allocated.
#include <gtest/gtest.h>

#include <string>

#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

CompileOptions batch_of_two() {
  CompileOptions co;
  co.batch = 2;
  return co;
}

TEST(PlannedMemory, CountsEachPartOfWhatIsKeptBeside) {
  const test::SmallModel m = test::branchy_model();
  auto backend = make_backend("reference");
  const Executor plain(m.graph, *backend, batch_of_two());
  const size_t arena = plain.plan().arena_bytes, values = plain.params().bytes();
  const size_t trainable = plain.params().trainable_bytes() + ParamStore::kSidebandBytes;
  const size_t inputs = plain.input("x").bytes() + plain.input("y").bytes();
  const PlannedMemory alone = plain.planned_memory();
  EXPECT_EQ(alone.activations, arena);
  EXPECT_EQ(alone.parameters, 2 * values);
  EXPECT_EQ(alone.state + alone.inputs, 0u);

  CompileOptions co = batch_of_two();
  co.beside = {.activation_sets = 3, .trainable_copies = 2, .value_copies = 1, .input_sets = 1};
  const PlannedMemory beside = Executor(m.graph, *backend, co).planned_memory();
  EXPECT_EQ(beside.activations, 3 * arena);
  EXPECT_EQ(beside.parameters, 2 * values);
  EXPECT_EQ(beside.state, 2 * trainable + values);
  EXPECT_EQ(beside.inputs, inputs);
  EXPECT_EQ(beside.total(), 3 * arena + 3 * values + 2 * trainable + inputs);
}

// A limit the sum fits exactly compiles; a byte less is refused before the arena is allocated,
// with every part named.
TEST(PlannedMemory, TheCheckRefusesWhatThePartsNeedTogether) {
  const test::SmallModel m = test::branchy_model();
  auto backend = make_backend("reference");
  CompileOptions co = batch_of_two();
  co.beside = {.activation_sets = 2, .trainable_copies = 1, .value_copies = 0, .input_sets = 1};
  co.allocate = false;
  const size_t need = Executor(m.graph, *backend, co).planned_memory().total();
  co.allocate = true;
  co.memory_limit = need;
  co.memory_limit_source = "a test's limit";
  EXPECT_NO_THROW(Executor(m.graph, *backend, co));
  co.memory_limit = need - 1;
  try {
    Executor ex(m.graph, *backend, co);
    FAIL() << "compiled beyond the limit";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::input);
    for (const char* part :
         {"a test's limit: the compiled program needs", "activations and kernel scratch",
          "(2 sets)", "parameters and gradients", "optimizer state", "the next batch's inputs"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in " << what;
  }
}

}  // namespace
}  // namespace crest
