// `crest search` under mpirun: 4 ranks in 2 groups of 2, each group training its trials
// data-parallel. Every trial must end exactly where `crest train` with its config alone on 2
// ranks ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "support/background_run.hpp"
#include "support/cli_util.hpp"
#include "support/search_study.hpp"
#include "support/tiny_run.hpp"

namespace crest {
namespace {

using test::CliRun;
using test::final_rows;
using test::newest_checkpoint;
using test::run_crest_mpi;
using test::TempDir;
using test::write_space;

// 1 thread per rank: 4 ranks share CI's 2 cores.
std::string tiny_args() { return test::tiny_cosmoflow_args() + " crest.threads=1 data.n_epochs=2"; }

// Each finished trial against `crest train` on 2 ranks with the base config and its parameters.
void expect_trials_equal_standalone_runs(const TempDir& d, const std::string& out,
                                         const std::vector<std::string>& keys, size_t trials) {
  const auto rows = final_rows(out);
  ASSERT_EQ(rows.size(), trials);
  std::set<int> groups;
  for (const auto& row : rows) {
    ASSERT_EQ(row["status"], "completed") << row.dump();
    groups.insert(row["group"].get<int>());
    const std::string id = std::to_string(row["trial"].get<int>());
    std::string params;
    for (const auto& k : keys) params += " " + k + "=" + row[k].dump();
    const std::string alone = d.file("alone" + id);
    const CliRun r = run_crest_mpi(2, "train " + tiny_args() + params + " output_dir=" + alone);
    ASSERT_EQ(r.code, 0) << r.out;
    SCOPED_TRACE("trial " + id + params);
    test::expect_same_tensors(newest_checkpoint(out + "/trials/" + id), newest_checkpoint(alone));
  }
  EXPECT_EQ(groups, (std::set<int>{0, 1})) << "both groups trained trials";
}

TEST(SearchMpi, GridOnTwoGroupsOfTwoRanksEqualsEachTrialTrainedAlone) {
  TempDir d;
  const std::string space = write_space(d,
                                        "parameters:\n"
                                        "  lr_schedule.base_lr: {grid: [0.01, 0.03]}\n"
                                        "  data.batch_size: {choice: [2, 4]}\n");
  const std::string out = d.file("study");
  const CliRun r = run_crest_mpi(4, "search " + tiny_args() + " --space " + space + " --out " +
                                        out + " --algorithm grid --ranks-per-trial 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 group(s) of 2 rank(s), 4 trials"), std::string::npos) << r.out;
  expect_trials_equal_standalone_runs(d, out, {"lr_schedule.base_lr", "data.batch_size"}, 4);
}

TEST(SearchMpi, RandomOnTwoGroupsEqualsEachTrialTrainedAlone) {
  TempDir d;
  const std::string space = write_space(d,
                                        "parameters:\n"
                                        "  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n"
                                        "  model.dropout: {uniform: [0, 0.5]}\n");
  const std::string out = d.file("study");
  const CliRun r = run_crest_mpi(4, "search " + tiny_args() + " --space " + space + " --out " +
                                        out + " --trials 3 --seed 11 --ranks-per-trial 2");
  ASSERT_EQ(r.code, 0) << r.out;
  expect_trials_equal_standalone_runs(d, out, {"lr_schedule.base_lr", "model.dropout"}, 3);
}

TEST(SearchMpi, ATrialThatFailsOnItsGroupIsRecordedAndTheStudyGoesOn) {
  TempDir d;
  const std::string space =
      write_space(d, "parameters:\n  lr_schedule.base_lr: {grid: [0.01, 1e12, 0.02]}\n");
  const std::string out = d.file("study");
  const CliRun r = run_crest_mpi(4, "search " + tiny_args() + " --space " + space + " --out " +
                                        out + " --algorithm grid --ranks-per-trial 2");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = final_rows(out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  for (const auto& row : rows) {
    const bool diverges = row["lr_schedule.base_lr"] == 1e12;
    EXPECT_EQ(row["status"], diverges ? "failed" : "completed") << row.dump();
    if (diverges) {
      EXPECT_NE(row["message"].get<std::string>().find("non-finite"), std::string::npos);
    }
  }
}

// A batch that group rank 1 cannot read (test hook, once per process: each group's first trial)
// ends that trial on both of its ranks together (src/train/rank_failure.hpp); it is recorded
// failed with that rank's error, and the groups go on to their next trials. Before, the group's
// other rank waited in the gradient exchange until the watchdog ended the whole job.
TEST(SearchMpi, ATrialThatFailsOnOneRankOfItsGroupEndsOnBothAndTheStudyGoesOn) {
  TempDir d;
  const std::string space =
      write_space(d, "parameters:\n  lr_schedule.base_lr: {grid: [0.01, 0.02, 0.03, 0.04]}\n");
  const std::string out = d.file("study");
  const CliRun r = test::run_mpirun("-np 4 -x CREST_TEST_BATCH_FAILURE_AT_STEP=2@1 " +
                                        std::string(CREST_BINARY) + " search " + tiny_args() +
                                        " dist.timeout_s=3600 --space " + space + " --out " + out +
                                        " --algorithm grid --ranks-per-trial 2",
                                    300);
  ASSERT_EQ(r.code, 0) << r.out;
  int failed = 0, completed = 0;
  for (const auto& row : final_rows(out)) {
    if (row["status"] == "failed") {
      ++failed;
      EXPECT_NE(row["message"].get<std::string>().find(
                    "rank 1 of 2: test fault: the batch of global step 2 could not be read"),
                std::string::npos)
          << row.dump();
    }
    completed += row["status"] == "completed";
  }
  EXPECT_EQ(failed, 2) << "each group's first trial";
  EXPECT_EQ(completed, 2);
}

// The final rows without their timings and groups (which group takes which trial depends on
// the groups' speeds): what two runs of the same random study must share.
std::vector<std::string> outcome(const std::string& out) {
  std::vector<std::string> rows;
  for (auto row : final_rows(out)) {
    row.erase("seconds");
    row.erase("group");
    rows.push_back(row.dump());
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// Runs the study `args` (without --out) on `ranks` ranks straight, and again with one rank
// killed by kill -9 once trial 1 has begun (mpirun then ends the job) and resumed: both must end
// with the same results.
void expect_kill_and_resume_gives_the_straight_results(const TempDir& d, int ranks,
                                                       const std::string& args) {
  const CliRun straight = run_crest_mpi(ranks, args + " --out " + d.file("straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const std::string out = d.file("killed");
  {
    test::BackgroundRun job(
        "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
        "OMPI_MCA_rmaps_base_oversubscribe=1 " +
            std::string(CREST_MPIEXEC) + " --bind-to none -np " + std::to_string(ranks) + " " +
            CREST_BINARY + " " + args + " --out " + out,
        d.file("killed.log"));
    ASSERT_TRUE(job.wait_for_file(out + "/trials/1/checkpoints")) << job.output();
    const CliRun pids = test::run_shell("pgrep -P " + std::to_string(job.pid()));
    ASSERT_FALSE(pids.out.empty()) << "no rank processes under mpirun";
    const std::string last = pids.out.substr(pids.out.rfind('\n', pids.out.size() - 2) + 1);
    test::run_shell("kill -9 " + last);
    EXPECT_NE(job.wait(), 0) << job.output();
  }
  const CliRun resumed = run_crest_mpi(ranks, "search --resume " + out);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_EQ(outcome(out), outcome(d.file("straight")));
}

TEST(SearchMpi, AStudyWhoseRankIsKilledResumesUnderMpirunToTheUninterruptedResults) {
  TempDir d;
  const std::string space =
      write_space(d, "parameters:\n  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n");
  expect_kill_and_resume_gives_the_straight_results(
      d, 4,
      "search " + test::tiny_cosmoflow_args() + " crest.threads=1 data.n_epochs=4 --space " +
          space + " --trials 4 --seed 2 --ranks-per-trial 2");
}

// PBT's generations make its decisions independent of timing, so a resumed PBT study, copies
// included, ends where the uninterrupted one does.
TEST(SearchMpi, APbtStudyWhoseRankIsKilledResumesToTheUninterruptedResults) {
  TempDir d;
  const std::string space = write_space(d,
                                        "parameters:\n"
                                        "  lr_schedule.base_lr: {loguniform: [1e-3, 3e-2]}\n"
                                        "pbt: {interval: 1, quantile: 0.5}\n");
  expect_kill_and_resume_gives_the_straight_results(
      d, 2,
      "search " + tiny_args() + " data.n_epochs=5 --space " + space + " --algorithm pbt --seed 5");
  int copies = 0;
  for (const auto& row : test::study_rows(d.file("killed")))
    copies += row["message"].get<std::string>().rfind("copied trial", 0) == 0;
  EXPECT_GE(copies, 1) << "the study must exercise copies";
}

// ASHA records a rung's results in entry order (docs/search.md), so 4 groups of 1 rank, whose
// reports arrive in an order set by the machine, promote and prune exactly as 1 group does.
TEST(SearchMpi, AshaOnFourGroupsPromotesAndPrunesTheTrialsOneGroupDoes) {
  TempDir d;
  const std::string space =
      write_space(d, "parameters:\n  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n");
  const std::string args = "search " + tiny_args() + " --space " + space +
                           " --algorithm asha --trials 9 --min-epochs 1 --max-epochs 3 --eta 3"
                           " --seed 4 --ranks-per-trial 1 --out ";
  const CliRun one = run_crest_mpi(1, args + d.file("one"));
  ASSERT_EQ(one.code, 0) << one.out;
  const CliRun four = run_crest_mpi(4, args + d.file("four"));
  ASSERT_EQ(four.code, 0) << four.out;
  EXPECT_EQ(outcome(d.file("four")), outcome(d.file("one")));
  std::set<std::string> statuses;
  for (const auto& row : final_rows(d.file("four"))) statuses.insert(row["status"]);
  EXPECT_EQ(statuses, (std::set<std::string>{"completed", "pruned"})) << "promotions and prunes";
}

TEST(SearchMpi, RanksThatDoNotSplitIntoEqualGroupsAreAUsageError) {
  TempDir d;
  const std::string space = write_space(d, "parameters:\n  model.dropout: {uniform: [0, 0.5]}\n");
  const CliRun r = run_crest_mpi(3, "search " + tiny_args() + " --space " + space + " --out " +
                                        d.file("s") + " --ranks-per-trial 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--ranks-per-trial 2 does not divide the 3 ranks"), std::string::npos)
      << r.out;
}

TEST(SearchMpi, PbtCopiesWeightsAndOptimizerStateExactlyAndTheReceiverGoesOnFromThem) {
  TempDir d;
  // Two members, one decision (after epoch 1 of 2): the worse one copies the better one.
  const std::string space = write_space(d,
                                        "parameters:\n"
                                        "  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n"
                                        "pbt: {interval: 1, quantile: 0.5}\n");
  const std::string out = d.file("study");
  const CliRun r = run_crest_mpi(2, "search " + tiny_args() + " --space " + space + " --out " +
                                        out + " --algorithm pbt --seed 3 train.checkpoint_keep=10");
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<nlohmann::json> copies;
  for (const auto& row : test::study_rows(out))
    if (row["message"].get<std::string>().find("copied trial") != std::string::npos)
      copies.push_back(row);
  ASSERT_EQ(copies.size(), 1u) << r.out;
  const nlohmann::json& copy = copies[0];
  const int receiver = copy["trial"], donor = 1 - receiver;
  const std::string message = copy["message"];
  const auto name_at = message.find("ckpt-");
  const std::string name = message.substr(name_at, message.find(',', name_at) - name_at);
  const std::string donor_dir = out + "/trials/" + std::to_string(donor);
  const std::string receiver_dir = out + "/trials/" + std::to_string(receiver);
  // The file arrived byte for byte: weights, optimizer state, position and history.
  const std::string sent = test::read_text(donor_dir + "/checkpoints/" + name);
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(test::read_text(receiver_dir + "/checkpoints/" + name), sent);
  // The receiver went on from the donor's state with its perturbed rate: the same bits as a run
  // resumed from the donor's checkpoint with that rate.
  const std::string alone = d.file("alone");
  std::filesystem::create_directories(alone + "/checkpoints");
  std::filesystem::copy_file(donor_dir + "/checkpoints/" + name, alone + "/checkpoints/" + name);
  std::filesystem::copy_file(donor_dir + "/config.yaml", alone + "/config.yaml");
  const CliRun resumed = test::run_crest("train --resume " + alone + " lr_schedule.base_lr=" +
                                         copy["lr_schedule.base_lr"].dump() + " data.n_epochs=2");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  test::expect_same_tensors(newest_checkpoint(receiver_dir), newest_checkpoint(alone));
  // After the copy the receiver trains the epoch after the donor's.
  bool after_copy = false;
  for (const auto& row : test::study_rows(out)) {
    if (row["trial"] != receiver) continue;
    if (after_copy) {
      EXPECT_EQ(row["epoch"], copy["epoch"].get<int>() + 1) << row.dump();
      break;
    }
    after_copy = row == copy;
  }
  EXPECT_TRUE(after_copy);
  const auto rows = final_rows(out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) EXPECT_EQ(row["status"], "completed") << row.dump();
}

TEST(SearchMpi, PbtRefusesModelKeysAndAOneGroupJob) {
  TempDir d;
  const std::string space = write_space(d, "parameters:\n  model.dropout: {uniform: [0, 0.5]}\n");
  CliRun r = run_crest_mpi(2, "search " + tiny_args() + " --space " + space + " --out " +
                                  d.file("s") + " --algorithm pbt");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("parameters.model.dropout: pbt cannot change it"), std::string::npos)
      << r.out;
  const std::string lr =
      write_space(d, "parameters:\n  lr_schedule.base_lr: {uniform: [0.01, 0.1]}\n");
  r = test::run_crest("search " + tiny_args() + " --space " + lr + " --out " + d.file("s") +
                      " --algorithm pbt");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("pbt needs at least 2 groups"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace crest
