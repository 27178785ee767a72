// load_trained_weights (crest/engine/trained_weights.hpp), which crest export and crest predict
// share: a run directory gives its newest checkpoint, a checkpoint file that one, only the
// model's tensors are read (no optimizer is needed), and wrong requests or files are refused
// naming what is wrong, with the model untouched.
#include "crest/engine/trained_weights.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/optim/optimizer.hpp"
#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

// A model compiled for inference, its weights from `seed`.
struct Model {
  std::unique_ptr<Backend> backend = make_backend("reference");
  std::unique_ptr<Executor> ex;
  Model(const test::SmallModel& m, uint64_t seed) {
    CompileOptions co;
    co.training = false;
    co.seed = seed;
    ex = std::make_unique<Executor>(m.graph, *backend, co);
  }
  ParamStore& params() { return ex->params(); }
  std::vector<char> values() const {
    const char* v = static_cast<const char*>(ex->params().values());
    return {v, v + ex->params().bytes()};
  }
};

// `m`'s weights as a checkpoint of global step `step` in dir/checkpoints.
std::string checkpoint(Model& m, const std::string& dir, int64_t step) {
  Adam opt(0.9, 0.999, 1e-7, 0, false);  // state the loader must ignore
  opt.attach(m.params(), m.ex->vec());
  CheckpointInfo info;
  info.position.global_step = step;
  info.optimizer = opt.name();
  return write_checkpoint(dir + "/checkpoints", info, m.params(), opt, 5);
}

TEST(TrainedWeights, RunDirectoryGivesItsNewestCheckpointAndAFileThatOne) {
  test::TempDir d;
  Model older(test::branchy_model(), 1), newer(test::branchy_model(), 2);
  const std::string first = checkpoint(older, d.file("run"), 4);
  checkpoint(newer, d.file("run"), 8);
  EXPECT_NE(older.values(), newer.values());

  Model loaded(test::branchy_model(), 3);
  load_trained_weights(loaded.params(), {}, d.file("run"), "");
  EXPECT_EQ(loaded.values(), newer.values());
  load_trained_weights(loaded.params(), {}, first, "");
  EXPECT_EQ(loaded.values(), older.values());
}

TEST(TrainedWeights, WeightsFileLoads) {
  test::TempDir d;
  Model saved(test::branchy_model(), 1), loaded(test::branchy_model(), 2);
  save_weights(saved.params(), d.file("w.safetensors"));
  load_trained_weights(loaded.params(), {}, "", d.file("w.safetensors"));
  EXPECT_EQ(loaded.values(), saved.values());
}

TEST(TrainedWeights, RequestsNeedExactlyOneSource) {
  Model m(test::branchy_model(), 1);
  for (const auto& [ckpt, weights] :
       std::vector<std::pair<std::string, std::string>>{{"", ""}, {"a", "b"}}) {
    try {
      load_trained_weights(m.params(), {}, ckpt, weights);
      FAIL() << "accepted checkpoint '" << ckpt << "' with weights '" << weights << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find("--checkpoint"), std::string::npos) << e.what();
    }
  }
}

TEST(TrainedWeights, CheckpointOfAnotherModelIsRefusedNamingFileAndTensor) {
  test::TempDir d;
  Model other(test::segmentation_model(), 1);
  const std::string path = checkpoint(other, d.file("run"), 4);
  Model m(test::branchy_model(), 2);
  const std::vector<char> before = m.values();
  try {
    load_trained_weights(m.params(), {}, path, "");
    FAIL() << "loaded another model's checkpoint";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'model/"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.values(), before);
}

TEST(TrainedWeights, DirectoryWithoutCheckpointsIsNamed) {
  test::TempDir d;
  Model m(test::branchy_model(), 1);
  try {
    load_trained_weights(m.params(), {}, d.file(""), "");
    FAIL() << "found a checkpoint in an empty directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("no checkpoint under"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crest
