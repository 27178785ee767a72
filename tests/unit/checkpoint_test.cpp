// The checkpoint file in-process: every field round-trips exactly, the optimizer state is sliced
// per parameter, loading into another model is refused before anything changes, older files
// without the loss scaler's fields still load, and keep-K prunes the oldest only.
#include "crest/train/checkpoint.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/data/safetensors.hpp"
#include "crest/engine/checkpoint_file.hpp"
#include "crest/graph/executor.hpp"
#include "support/cli_util.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

struct Trained {
  std::unique_ptr<Backend> backend = make_backend("reference");
  test::SmallModel model;
  std::unique_ptr<Executor> ex;
  std::unique_ptr<Optimizer> opt;
  explicit Trained(test::SmallModel m, uint64_t seed = 1) : model(std::move(m)) {
    CompileOptions co;
    co.batch = 2;
    co.seed = seed;
    ex = std::make_unique<Executor>(model.graph, *backend, co);
    opt = std::make_unique<Adam>(0.9, 0.999, 1e-7, 0, false);
    opt->attach(ex->params(), ex->vec());
  }
  // A few real steps, so the state is not zeros.
  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      TensorView x = ex->input("x"), y = ex->input("y");
      for (int64_t i = 0; i < x.numel(); ++i)
        x.as<float>()[i] = std::sin(0.1f * static_cast<float>(i + s));
      for (int64_t i = 0; i < y.numel(); ++i) y.as<float>()[i] = 0.5f;
      ex->forward(true);
      ex->backward();
      opt->step(0.01);
    }
  }
};

CheckpointInfo sample_info() {
  CheckpointInfo info;
  info.position.epoch = 3;
  info.position.step_in_epoch = 7;
  info.position.global_step = 37;
  info.position.executor_steps = 37;
  info.position.optimizer_steps = 37;
  info.position.epoch_loss_sum = 0.1 + 0.2;  // not representable in short decimal: must be exact
  info.position.best_val_loss = std::numeric_limits<double>::infinity();
  info.position.epochs_since_best = 2;
  info.position.overflow_steps = 4;
  info.position.loss_scaler = {1536.5, 17};  // not a power of two: must be exact too
  EpochStats e;
  e.epoch = 1;
  e.train_loss = 1.0 / 3.0;
  e.validated = true;
  e.val_metrics = {{"mae", std::nextafter(0.124, 1.0)}, {"mse", 1.0 / 3.0}};
  e.skipped = 5;
  info.history = {e, e};
  info.history[1].epoch = 2;
  info.ranks = 4;
  info.batch_size = 2;
  info.steps_per_epoch = 10;
  info.optimizer = "adam";
  info.config_yaml = "model:\n  name: cosmoflow\n";
  info.crest_version = "test";
  return info;
}

TEST(CheckpointFile, RoundTripsEveryFieldAndTensorExactly) {
  test::TempDir d;
  Trained a(test::branchy_model());
  a.train(3);
  CheckpointInfo info = sample_info();
  info.position.optimizer_steps = a.opt->steps_taken();
  const std::string path = write_checkpoint(d.file("ckpt"), info, a.ex->params(), *a.opt, 3);

  Trained b(test::branchy_model(), /*seed=*/2);  // other initial weights, zero optimizer state
  const CheckpointInfo got = read_checkpoint(path, b.ex->params(), *b.opt);
  EXPECT_EQ(std::memcmp(a.ex->params().values(), b.ex->params().values(),
                        a.ex->params().trainable_bytes()),
            0);
  const auto sa = a.opt->state(), sb = b.opt->state();
  ASSERT_EQ(sa.size(), 2u);
  for (size_t i = 0; i < sa.size(); ++i)
    EXPECT_EQ(
        std::memcmp(sa[i].second->data(), sb[i].second->data(), a.ex->params().trainable_bytes()),
        0)
        << sa[i].first;
  EXPECT_EQ(b.opt->steps_taken(), 3);
  EXPECT_EQ(got.position.epoch, 3);
  EXPECT_EQ(got.position.step_in_epoch, 7);
  EXPECT_EQ(got.position.global_step, 37);
  EXPECT_EQ(got.position.epoch_loss_sum, 0.1 + 0.2);
  EXPECT_TRUE(std::isinf(got.position.best_val_loss));
  EXPECT_EQ(got.position.epochs_since_best, 2);
  EXPECT_EQ(got.position.overflow_steps, 4);
  EXPECT_EQ(got.position.loss_scaler.scale, 1536.5);
  EXPECT_EQ(got.position.loss_scaler.clean_steps, 17);
  ASSERT_EQ(got.history.size(), 2u);
  EXPECT_EQ(got.history[0].train_loss, 1.0 / 3.0);
  EXPECT_EQ(got.history[1].val_metrics, info.history[1].val_metrics);
  EXPECT_EQ(got.history[0].val_metric("mae"), std::nextafter(0.124, 1.0));
  EXPECT_TRUE(got.history[1].validated);
  EXPECT_EQ(got.history[1].skipped, 5);
  EXPECT_EQ(got.ranks, 4);
  EXPECT_EQ(got.config_yaml, info.config_yaml);
}

// A checkpoint written tensor by tensor for a layout without buffers (as a pipeline's rank 0
// writes one, its stages sending the tensors): each tensor is asked for once, in the file's
// (name) order, and the file verifies and loads as one written from memory; verify_checkpoint
// checks it against the layout without loading anything.
TEST(CheckpointFile, AStreamedWriteAsksForEachTensorOnceInNameOrder) {
  test::TempDir d;
  Trained a(test::branchy_model());
  a.train(3);
  CompileOptions layout_only;
  layout_only.batch = 2;
  layout_only.allocate = false;
  layout_only.allocate_params = false;
  const Executor layout(a.model.graph, *a.backend, layout_only);
  ASSERT_FALSE(layout.params().allocated());
  const std::vector<std::string> states = checkpoint_file::state_names(*a.opt);
  std::vector<std::string> asked;
  std::string path;
  checkpoint_file::with_host_bytes(
      a.ex->params(), a.opt.get(), {}, [&](const checkpoint_file::StateBytes& from_memory) {
        path = write_checkpoint(
            d.file("ckpt"), sample_info(), layout.params(), states,
            [&](const checkpoint_file::StateTensor& t) {
              const std::string& name = layout.params().slots()[t.slot].name;
              asked.push_back((t.state.empty() ? "model/" : "optimizer/" + t.state + "/") + name);
              const int in_memory = a.ex->params().find(name);  // slots are found by name
              return from_memory({t.state, static_cast<size_t>(in_memory)});
            },
            3);
      });
  std::vector<std::string> in_order = asked;
  std::sort(in_order.begin(), in_order.end());
  EXPECT_EQ(asked, in_order);
  EXPECT_EQ(std::adjacent_find(asked.begin(), asked.end()), asked.end());  // once each
  EXPECT_EQ(asked.size(), layout.params().slots().size() * 3);             // values, m, v

  const VerifiedCheckpoint v = verify_checkpoint(path, layout.params(), states, "adam");
  EXPECT_EQ(v.info.position.global_step, 37);
  EXPECT_THROW((void)verify_checkpoint(path, layout.params(), states, "sgd"), Error);
  Trained b(test::branchy_model(), /*seed=*/2);
  (void)read_checkpoint(path, b.ex->params(), *b.opt);
  EXPECT_EQ(std::memcmp(a.ex->params().values(), b.ex->params().values(),
                        a.ex->params().trainable_bytes()),
            0);
}

TEST(CheckpointFile, AnotherModelIsRefusedBeforeAnythingChanges) {
  test::TempDir d;
  Trained a(test::branchy_model());
  a.train(1);
  const std::string path =
      write_checkpoint(d.file("ckpt"), sample_info(), a.ex->params(), *a.opt, 3);
  Trained other(test::pooling3d_model());
  std::vector<std::byte> before(other.ex->params().bytes());
  std::memcpy(before.data(), other.ex->params().values(), before.size());
  try {
    read_checkpoint(path, other.ex->params(), *other.opt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model"), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::memcmp(before.data(), other.ex->params().values(), before.size()), 0);
  // Another optimizer's state is refused by name.
  Trained sgd(test::branchy_model());
  sgd.opt = std::make_unique<SgdKeras>(0.9);
  sgd.opt->attach(sgd.ex->params(), sgd.ex->vec());
  try {
    read_checkpoint(path, sgd.ex->params(), *sgd.opt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer 'adam'"), std::string::npos) << e.what();
  }
}

// `path` rewritten with its metadata changed by `edit` and a matching checksum: a checkpoint as an
// older (or a hostile) writer would have written it.
void rewrite_metadata(const std::string& path,
                      const std::function<void(std::map<std::string, std::string>&)>& edit) {
  std::map<std::string, std::string> md;
  std::vector<std::vector<std::byte>> bytes;
  std::vector<SafetensorsEntry> entries;
  {
    const SafetensorsFile f(path);
    md = f.metadata();
    for (const auto& t : f.tensors()) {
      bytes.emplace_back(t.data, t.data + t.bytes);
      entries.push_back({t.name, *to_crest_dtype(t.dtype), t.crest_shape(), nullptr});
    }
  }
  checkpoint_file::TensorBytes tensors;
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].data = bytes[i].data();
    tensors.push_back({entries[i].name, {bytes[i].data(), bytes[i].size()}});
  }
  edit(md);
  md["checksum"] = checkpoint_file::crc_text(checkpoint_file::content_crc(md, tensors));
  write_safetensors(path, entries, md);
}

// Checkpoints written before loss scaling existed have neither the scale nor the counts: they
// load, with no scale (the scaler then starts at its initial one) and no overflow steps.
TEST(CheckpointFile, OlderCheckpointsWithoutTheLossScaleStillLoad) {
  test::TempDir d;
  Trained a(test::branchy_model());
  a.train(1);
  const std::string path =
      write_checkpoint(d.file("ckpt"), sample_info(), a.ex->params(), *a.opt, 3);
  rewrite_metadata(path, [](auto& md) {
    for (const char* key : {"loss_scale", "loss_scale_clean_steps", "overflow_steps"})
      ASSERT_EQ(md.erase(key), 1u) << key;
  });
  const CheckpointInfo got = read_checkpoint(path, a.ex->params(), *a.opt);
  EXPECT_EQ(got.position.loss_scaler.scale, 0);
  EXPECT_EQ(got.position.loss_scaler.clean_steps, 0);
  EXPECT_EQ(got.position.overflow_steps, 0);
  EXPECT_EQ(got.position.global_step, 37);

  rewrite_metadata(path, [](auto& md) {
    md["loss_scale"] = "-0x1p+3";
    md["loss_scale_clean_steps"] = "0";
    md["overflow_steps"] = "0";
  });
  try {
    (void)read_checkpoint_info(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("'loss_scale' is not a loss scale"), std::string::npos)
        << e.what();
  }
}

TEST(CheckpointFile, KeepsTheNewestKAndIgnoresTemporaryFiles) {
  test::TempDir d;
  Trained a(test::branchy_model());
  CheckpointInfo info = sample_info();
  const std::string dir = d.file("ckpt");
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/ckpt-000000000099.safetensors.tmp-abcdef") << "partial"; }
  { std::ofstream(dir + "/notes.txt") << "mine"; }
  for (int64_t step : {10, 20, 30, 40}) {
    info.position.global_step = step;
    write_checkpoint(dir, info, a.ex->params(), *a.opt, 2);
  }
  const auto left = list_checkpoints(dir);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_NE(left[0].find("000000000030"), std::string::npos);
  EXPECT_NE(left[1].find("000000000040"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir + "/notes.txt"));  // only checkpoints are pruned
  EXPECT_EQ(read_checkpoint_info(left[1]).position.global_step, 40);
}

}  // namespace
}  // namespace crest
