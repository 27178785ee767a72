// Checkpoints and `crest train --resume` end to end: resumed runs are bit-identical to straight
// ones (shuffle and dropout on, at an epoch boundary and mid-epoch), a write killed half-way or
// cut short by a full disk leaves the previous checkpoint usable, damaged or foreign files and
// incompatible resumes are refused with messages naming the file and the defect.
#include "crest/train/checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/safetensors.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace fs = std::filesystem;

namespace {

using crest::test::CliRun;
using crest::test::expect_same_tensors;
using crest::test::run_crest;
using crest::test::run_shell;
using crest::test::TempDir;

// 4 steps per epoch.
const std::string kSmall = crest::test::tiny_cosmoflow_args();
using crest::test::read_text;

std::string out_of(const std::string& dir) { return " output_dir=" + dir; }

std::vector<std::string> checkpoints(const std::string& run) {
  return crest::list_checkpoints(run + "/checkpoints");
}

TEST(Checkpoint, ResumeAfterAnEpochIsBitIdenticalToAStraightRun) {
  TempDir d;
  CliRun straight = run_crest("train " + kSmall + " data.n_epochs=2" + out_of(d.file("straight")) +
                              " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  CliRun first = run_crest("train " + kSmall + " data.n_epochs=1" + out_of(d.file("split")));
  ASSERT_EQ(first.code, 0) << first.out;
  ASSERT_EQ(checkpoints(d.file("split")).size(), 1u);
  // The config comes from the run directory; the override lengthens the run.
  CliRun resumed = run_crest("train --resume " + d.file("split") +
                             " data.n_epochs=2 --save-weights " + d.file("split.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
  EXPECT_EQ(resumed.out.find("epoch 1/2"), std::string::npos) << "epoch 1 ran again:\n"
                                                              << resumed.out;
  expect_same_tensors(d.file("straight.safetensors"), d.file("split.safetensors"));
  // The checkpoints hold the same optimizer state too.
  expect_same_tensors(checkpoints(d.file("straight")).back(), checkpoints(d.file("split")).back());
  // The log of the second epoch is the same line (timings aside).
  auto epoch2 = [](const std::string& out) {
    const auto at = out.find("epoch 2/2");
    return out.substr(at, out.find("lr", at) - at);
  };
  EXPECT_EQ(epoch2(straight.out), epoch2(resumed.out));
  // The run directory: config copy, log (appended by the resume), checkpoints, TensorBoard.
  EXPECT_TRUE(fs::exists(d.file("split/config.yaml")));
  const std::string text = read_text(d.file("split/train.log"));
  EXPECT_NE(text.find("epoch 1/1"), std::string::npos) << text;
  EXPECT_NE(text.find("epoch 2/2"), std::string::npos) << text;
  // The MLPerf log is continued, not replaced.
  const std::string mllog = read_text(d.file("split/mllog.txt"));
  EXPECT_NE(mllog.find("\"crest_resumed\""), std::string::npos) << mllog;
  EXPECT_LT(mllog.find("\"epoch_num\": 1"), mllog.find("\"crest_resumed\"")) << mllog;
  EXPECT_FALSE(fs::exists(d.file("split/mllog.1.txt")));
}

TEST(Checkpoint, KillDuringAWriteLeavesThePreviousOneAndMidEpochResumeIsExact) {
  TempDir d;
  CliRun straight = run_crest("train " + kSmall + " data.n_epochs=2" + out_of(d.file("straight")) +
                              " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  // Checkpoints every 3 steps: step 3 (mid-epoch 1) is written, the process dies half-way
  // through writing step 6's (mid-epoch 2).
  CliRun killed = run_shell(
      "CREST_TEST_KILL_DURING_CHECKPOINT=2 " + std::string(CREST_BINARY) + " train " + kSmall +
      " data.n_epochs=2 'train.checkpoint_every=3 steps'" + out_of(d.file("run")) + " 2>&1");
  EXPECT_NE(killed.code, 0) << killed.out;
  const auto left = checkpoints(d.file("run"));
  ASSERT_EQ(left.size(), 1u) << killed.out;
  EXPECT_NE(left[0].find("000000000003"), std::string::npos) << left[0];
  EXPECT_NO_THROW((void)crest::read_checkpoint_info(left[0]));
  // The half-written file is a temporary one, never a checkpoint.
  bool temp_left = false;
  for (const auto& e : fs::directory_iterator(d.file("run/checkpoints")))
    temp_left |= e.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_TRUE(temp_left) << "the kill should have hit a write in progress";

  CliRun resumed =
      run_crest("train --resume " + d.file("run") + " --save-weights " + d.file("run.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("epoch 1, step 3"), std::string::npos) << resumed.out;
  expect_same_tensors(d.file("straight.safetensors"), d.file("run.safetensors"));
  for (const auto& e : fs::directory_iterator(d.file("run/checkpoints")))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos)
        << "stale temporary file left";
}

TEST(Checkpoint, FullDiskDuringAWriteFailsNamingTheFileAndKeepsThePreviousOne) {
  TempDir d;
  ASSERT_EQ(run_crest("train " + kSmall + " data.n_epochs=1" + out_of(d.file("run"))).code, 0);
  const std::string good = checkpoints(d.file("run")).back();
  const auto size = fs::file_size(good);
  // A file size limit below one checkpoint: write() fails with EFBIG as on a full disk (SIGXFSZ
  // ignored so the process sees the error instead of dying).
  CliRun full =
      run_shell("trap '' XFSZ; ulimit -f " + std::to_string(size / 1024 / 2) + "; " + CREST_BINARY +
                " train --resume " + d.file("run") + " data.n_epochs=2 2>&1");
  EXPECT_NE(full.code, 0) << full.out;
  EXPECT_NE(full.out.find("ckpt-000000000008.safetensors"), std::string::npos) << full.out;
  EXPECT_EQ(checkpoints(d.file("run")), std::vector<std::string>{good});
  EXPECT_NO_THROW((void)crest::read_checkpoint_info(good));
  // And the run continues from it once there is room.
  CliRun again = run_crest("train --resume " + d.file("run") + " data.n_epochs=2");
  EXPECT_EQ(again.code, 0) << again.out;
}

TEST(Checkpoint, KeepsTheNewestKAndWritesAtTheEnd) {
  TempDir d;
  CliRun r = run_crest("train " + kSmall +
                       " data.n_epochs=3 train.checkpoint_every=2 train.checkpoint_keep=1" +
                       out_of(d.file("run")));
  ASSERT_EQ(r.code, 0) << r.out;
  // Epoch 2's checkpoint (step 8), then the final one (step 12), which replaces it.
  EXPECT_NE(r.out.find("ckpt-000000000008"), std::string::npos) << r.out;
  const auto left = checkpoints(d.file("run"));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_NE(left[0].find("000000000012"), std::string::npos);
  const crest::CheckpointInfo info = crest::read_checkpoint_info(left[0]);
  EXPECT_EQ(info.position.epoch, 3);
  EXPECT_EQ(info.position.step_in_epoch, 0);
  EXPECT_EQ(info.position.status, "success");
  EXPECT_EQ(info.history.size(), 3u);
  // Resuming a finished run without more epochs has nothing to do and says so.
  CliRun again = run_crest("train --resume " + d.file("run"));
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("nothing to do"), std::string::npos) << again.out;
}

TEST(Checkpoint, DamagedOrForeignFilesAreRefusedNamingTheFile) {
  TempDir d;
  ASSERT_EQ(run_crest("train " + kSmall + " data.n_epochs=1" + out_of(d.file("run")) +
                      " --save-weights " + d.file("w.safetensors"))
                .code,
            0);
  const std::string ckpt = checkpoints(d.file("run")).back();
  fs::copy_file(ckpt, d.file("good"));
  auto resume_error = [&]() {
    CliRun r = run_crest("train --resume " + d.file("run") + " data.n_epochs=2");
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(ckpt), std::string::npos) << r.out;
    return r.out;
  };
  {  // One flipped byte in the tensor data.
    std::fstream f(ckpt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(ckpt) - 100));
    f.put('\x7f');
  }
  EXPECT_NE(resume_error().find("corrupt"), std::string::npos);
  fs::resize_file(ckpt, fs::file_size(ckpt) / 2);  // truncated
  EXPECT_NE(resume_error().find(ckpt), std::string::npos);
  fs::copy_file(d.file("w.safetensors"), ckpt,
                fs::copy_options::overwrite_existing);  // weights, not a checkpoint
  EXPECT_NE(resume_error().find("not a crest checkpoint"), std::string::npos);
  { std::ofstream(ckpt, std::ios::trunc) << "hello"; }  // not safetensors at all
  resume_error();
  fs::copy_file(d.file("good"), ckpt, fs::copy_options::overwrite_existing);
  EXPECT_EQ(run_crest("train --resume " + d.file("run") + " data.n_epochs=2").code, 0);
}

TEST(Checkpoint, IncompatibleResumesAreRefusedWithWhatDiffers) {
  TempDir d;
  ASSERT_EQ(run_crest("train " + kSmall + " data.n_epochs=1" + out_of(d.file("run"))).code, 0);
  CliRun model =
      run_crest("train --resume " + d.file("run") + " data.n_epochs=2 model.fc1_size=64");
  EXPECT_EQ(model.code, 2) << model.out;
  EXPECT_NE(model.out.find("changed model"), std::string::npos) << model.out;
  EXPECT_NE(model.out.find("fc1_size"), std::string::npos) << model.out;
  CliRun opt =
      run_crest("train --resume " + d.file("run") + " data.n_epochs=2 optimizer.name=Adam");
  EXPECT_EQ(opt.code, 2) << opt.out;
  EXPECT_NE(opt.out.find("optimizer"), std::string::npos) << opt.out;
  CliRun nodir = run_crest("train --resume " + d.file("nothing"));
  EXPECT_EQ(nodir.code, 2) << nodir.out;
  EXPECT_NE(nodir.out.find("not a crest run directory"), std::string::npos) << nodir.out;
  // Mid-epoch, the data position needs the same batch size.
  ASSERT_EQ(run_crest("train " + kSmall +
                      " data.n_epochs=1 'train.checkpoint_every=2 steps' train.checkpoint_keep=5" +
                      out_of(d.file("mid")))
                .code,
            0);
  fs::remove(checkpoints(d.file("mid")).back());  // back to step 2 of epoch 1
  CliRun batch = run_crest("train --resume " + d.file("mid") + " data.batch_size=2");
  EXPECT_EQ(batch.code, 2) << batch.out;
  EXPECT_NE(batch.out.find("data.batch_size"), std::string::npos) << batch.out;
}

// Early stopping counts epochs without a lower validation loss, across a resume too: the count
// is in the checkpoint. A learning rate of 1e-30 leaves the weights (and so the loss) unchanged.
TEST(Checkpoint, EarlyStoppingStopsAfterPatienceEpochsAndItsCountSurvivesAResume) {
  TempDir d;
  const std::string still =
      " lr_schedule.base_lr=1e-30 lr_schedule.n_warmup_epochs=0 lr_schedule.decay_schedule={}"
      " model.dropout=0 train.early_stopping_patience=2";
  CliRun straight =
      run_crest("train " + kSmall + still + " data.n_epochs=10" + out_of(d.file("straight")));
  ASSERT_EQ(straight.code, 0) << straight.out;
  EXPECT_NE(straight.out.find("early stopping: val_loss has not improved for 2 epochs"),
            std::string::npos)
      << straight.out;
  EXPECT_NE(straight.out.find("done: 3 epochs"), std::string::npos) << straight.out;
  EXPECT_EQ(straight.out.find("epoch 4/10"), std::string::npos) << straight.out;
  // Two epochs (one without improvement), then resumed: it stops after the third, as above.
  ASSERT_EQ(
      run_crest("train " + kSmall + still + " data.n_epochs=2" + out_of(d.file("split"))).code, 0);
  CliRun resumed = run_crest("train --resume " + d.file("split") + " data.n_epochs=10");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("early stopping: val_loss has not improved for 2 epochs"),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("epoch 3/10"), std::string::npos) << resumed.out;
  EXPECT_EQ(resumed.out.find("epoch 4/10"), std::string::npos) << resumed.out;
}

TEST(Checkpoint, AFreshRunDoesNotSilentlyReplaceAnEarlierRun) {
  TempDir d;
  ASSERT_EQ(run_crest("train " + kSmall + " data.n_epochs=1" + out_of(d.file("run"))).code, 0);
  const auto before = checkpoints(d.file("run"));
  CliRun again = run_crest("train " + kSmall + " data.n_epochs=1" + out_of(d.file("run")));
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.out.find("--resume"), std::string::npos) << again.out;
  EXPECT_EQ(checkpoints(d.file("run")), before);
  CliRun over =
      run_crest("train " + kSmall + " data.n_epochs=1 --overwrite" + out_of(d.file("run")));
  EXPECT_EQ(over.code, 0) << over.out;
}

}  // namespace
