// A pipeline stage's start from a whole model's weights file without the whole model's buffers
// (crest/engine/weights.hpp load_weights_part, crest/graph/param_store.hpp allocate false): the
// whole model is a layout on every rank but one, the file is checked against that layout (a
// tensor missing anywhere in the model or one too many is refused naming the file and the tensor,
// the stage left untouched), and the stage reads its own parameters' values alone.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/data/safetensors.hpp"
#include "crest/engine/weights.hpp"
#include "crest/graph/executor.hpp"
#include "support/cli_util.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

std::unique_ptr<Executor> compiled(Backend& backend, uint64_t seed, bool params) {
  CompileOptions co;
  co.seed = seed;
  co.allocate = params;
  co.allocate_params = params;
  return std::make_unique<Executor>(test::branchy_model().graph, backend, co);
}

// A stage's store: the named parameters of `whole`'s layout, laid out as a store of their own.
ParamStore part_of(const ParamStore& whole, const std::vector<std::string>& names,
                   Backend& backend) {
  std::vector<ParamSlot> slots;
  for (const std::string& n : names) {
    const int at = whole.find(n);
    EXPECT_GE(at, 0) << n;
    ParamSlot s = whole.slots()[static_cast<size_t>(at)];
    s.offset = s.count = 0;
    slots.push_back(s);
  }
  return ParamStore(slots, whole.dtype(), backend);
}

std::vector<float> values_of(const ParamStore& p, const std::string& name) {
  const ParamSlot& s = p.slots()[static_cast<size_t>(p.find(name))];
  const auto* v = reinterpret_cast<const float*>(static_cast<const char*>(p.values()) + s.offset);
  return {v, v + s.count};
}

std::vector<char> bytes_of(const ParamStore& p) {
  const char* v = static_cast<const char*>(p.values());
  return {v, v + p.bytes()};
}

// The whole model's weights written with the tensor `drop` left out (none when empty) and, when
// `extra` is set, one tensor too many.
std::string weights_file(const ParamStore& whole, const std::string& path,
                         const std::string& drop = "", bool extra = false) {
  WeightTensors w = weight_tensors(whole);
  std::vector<SafetensorsEntry> kept;
  for (const SafetensorsEntry& e : w.entries)
    if (e.name != drop) kept.push_back(e);
  const float stray[2] = {1.f, 2.f};
  if (extra) kept.push_back({"stray.weight", DType::f32, Shape{2}, stray});
  write_safetensors(path, kept, {});
  return path;
}

const std::vector<std::string> kStage = {"fc1.weight", "fc1.bias"};

TEST(WeightsPart, AWholeModelPlanWithoutParameterBuffersKeepsTheirLayout) {
  auto backend = make_backend("reference");
  const auto whole = compiled(*backend, 1, true);
  const auto plan = compiled(*backend, 1, false);
  const ParamStore &a = whole->params(), &b = plan->params();
  EXPECT_TRUE(a.allocated());
  EXPECT_FALSE(b.allocated());
  EXPECT_EQ(b.values(), nullptr);
  EXPECT_EQ(b.grads(), nullptr);
  EXPECT_EQ(a.bytes(), b.bytes());
  EXPECT_EQ(a.trainable_bytes(), b.trainable_bytes());
  EXPECT_EQ(a.parameter_count(), b.parameter_count());
  ASSERT_EQ(a.slots().size(), b.slots().size());
  for (size_t i = 0; i < a.slots().size(); ++i) {
    EXPECT_EQ(a.slots()[i].name, b.slots()[i].name);
    EXPECT_EQ(a.slots()[i].offset, b.slots()[i].offset) << a.slots()[i].name;
  }
  EXPECT_GT(plan->training_flops(), 0);  // the plan still counts the model's FLOPs
}

TEST(WeightsPart, AStageReadsItsOwnParametersFromTheWholeModelsFile) {
  auto backend = make_backend("reference");
  test::TempDir d;
  const auto source = compiled(*backend, 7, true);
  ParamStore& from = source->params();
  const ParamSlot& bias = from.slots()[static_cast<size_t>(from.find("fc1.bias"))];
  auto* b = reinterpret_cast<float*>(static_cast<char*>(from.values()) + bias.offset);
  for (size_t i = 0; i < bias.count; ++i) b[i] = 0.25f * static_cast<float>(i + 1);  // not zero
  const std::string file = weights_file(from, d.file("whole.safetensors"));
  const auto layout = compiled(*backend, 1, false);
  ParamStore stage = part_of(layout->params(), kStage, *backend);
  stage.initialize(1);
  for (const std::string& n : kStage) ASSERT_NE(values_of(stage, n), values_of(from, n)) << n;
  load_weights_part(stage, layout->params(), file);
  for (const std::string& n : kStage) EXPECT_EQ(values_of(stage, n), values_of(from, n)) << n;
}

TEST(WeightsPart, AFileThatIsNotTheWholeModelIsRefusedNamingTheTensor) {
  auto backend = make_backend("reference");
  test::TempDir d;
  const auto source = compiled(*backend, 7, true);
  const auto layout = compiled(*backend, 1, false);
  ParamStore stage = part_of(layout->params(), kStage, *backend);
  stage.initialize(1);
  const std::vector<char> before = bytes_of(stage);
  auto refused = [&](const std::string& file, const std::string& says) {
    try {
      load_weights_part(stage, layout->params(), file);
      ADD_FAILURE() << file << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
    EXPECT_EQ(bytes_of(stage), before) << "the stage changed";
  };
  // Missing from another stage's part: the stage would load, the model would not.
  refused(weights_file(source->params(), d.file("no_conv1.safetensors"), "conv1.weight"),
          "missing parameter 'conv1.weight'");
  refused(weights_file(source->params(), d.file("stray.safetensors"), "", true),
          "tensor 'stray.weight' is not a parameter of this model");
}

}  // namespace
}  // namespace crest
