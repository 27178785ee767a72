// `crest search` in one process: bad spaces refused before training, failed trials recorded,
// results a plain table, best.yaml trainable as is, ASHA's promoted trials equal straight runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "support/background_run.hpp"
#include "support/cli_util.hpp"
#include "support/search_study.hpp"
#include "support/tiny_run.hpp"

namespace crest {
namespace {

using test::CliRun;
using test::final_rows;
using test::newest_checkpoint;
using test::run_crest;
using test::study_rows;
using test::TempDir;
using test::write_space;

std::string search_args(const std::string& space, const std::string& out) {
  return "search " + test::tiny_cosmoflow_args() + " data.n_epochs=2 --space " + space + " --out " +
         out;
}

TEST(SearchCli, ABadSpaceExits2NamingTheKeyAndFileBeforeAnyTraining) {
  TempDir d;
  const struct {
    std::string params, expect;
  } cases[] = {
      {"  model.dropuot: {uniform: [0, 0.5]}\n", "parameters.model.dropuot"},
      {"  model.dropout: {uniform: [0.5, 0]}\n",
       "parameters.model.dropout: uniform low 0.5 > high 0"},
      {"  lr_schedule.base_lr: {loguniform: [-1, 0.1]}\n", "parameters.lr_schedule.base_lr"},
      {"  data.batch_size: {choice: []}\n", "parameters.data.batch_size"},
      {"  data.batch_size: {choice: [4, 0]}\n", "parameters.data.batch_size: the value 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.params);
    const std::string space = write_space(d, "parameters:\n" + c.params);
    const CliRun r = run_crest(search_args(space, d.file("study")));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(space + ":2: " + c.expect), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(d.file("study"))) << "nothing may start: " << r.out;
  }
  const std::string space = write_space(d, "parameters:\n  model.dropout: {uniform: [0, 0.5]}\n");
  const CliRun grid = run_crest(search_args(space, d.file("study")) + " --algorithm grid");
  EXPECT_EQ(grid.code, 2) << grid.out;
  EXPECT_NE(grid.out.find("parameters.model.dropout: a grid study enumerates"), std::string::npos)
      << grid.out;
}

TEST(SearchCli, AFailingTrialIsRecordedWithItsMessageAndTheStudyGoesOn) {
  TempDir d;
  const std::string space =
      write_space(d, "parameters:\n  lr_schedule.base_lr: {grid: [1e12, 0.01]}\n");
  const std::string out = d.file("study");
  const CliRun r = run_crest(search_args(space, out) + " --algorithm grid");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = final_rows(out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0]["trial"], 0);
  EXPECT_EQ(rows[0]["status"], "failed");
  EXPECT_NE(rows[0]["message"].get<std::string>().find("non-finite"), std::string::npos);
  EXPECT_EQ(rows[1]["status"], "completed");
  EXPECT_EQ(rows[1]["lr_schedule.base_lr"], 0.01);
  EXPECT_EQ(rows[1]["epoch"], 2);
  // The CSV has the same columns, named by the config keys.
  const std::string csv = test::read_text(out + "/trials.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "trial,group,status,epoch,lr_schedule.base_lr,train_loss,val_loss,val_mae,seconds,"
            "message");
  // ... and one row per trial (the results table; trials.jsonl is the event log).
  std::vector<std::string> lines;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << csv;
  EXPECT_EQ(lines[1].rfind("0,0,failed,", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("non-finite"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].rfind("1,0,completed,2,0.01,", 0), 0u) << lines[2];
}

// On a terminal (script(1) gives the command a pseudo-terminal) `crest train` draws its
// progress bar; the trials of `crest search` must not, or their bars would overwrite the study's
// own lines.
TEST(SearchCli, OnATerminalTheTrialsDrawNoProgressBar) {
  TempDir d;
  const auto on_a_terminal = [&](const std::string& args) {
    return test::run_shell("script -qec '" + std::string(CREST_BINARY) + " " + args +
                           "' /dev/null 2>&1");
  };
  const std::string bar = "\r\033[K";
  const CliRun train =
      on_a_terminal("train " + test::tiny_cosmoflow_args() + " output_dir=" + d.file("run"));
  ASSERT_EQ(train.code, 0) << train.out;
  ASSERT_NE(train.out.find(bar), std::string::npos) << "no bar on the pseudo-terminal at all";
  const std::string space = write_space(d, "parameters:\n  model.dropout: {grid: [0, 0.1]}\n");
  const CliRun search =
      on_a_terminal(search_args(space, d.file("study")) + " --algorithm grid data.n_epochs=4");
  ASSERT_EQ(search.code, 0) << search.out;
  EXPECT_NE(search.out.find("crest search:"), std::string::npos) << search.out;
  EXPECT_EQ(search.out.find(bar), std::string::npos) << search.out;
}

TEST(SearchCli, BestYamlTrainsAsIsToTheBestTrialsResult) {
  TempDir d;
  const std::string space =
      write_space(d,
                  "parameters:\n  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n"
                  "  data.batch_size: {choice: [2, 4]}\n");
  const std::string out = d.file("study");
  const CliRun r = run_crest(search_args(space, out) + " --trials 3 --seed 5");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = final_rows(out);
  ASSERT_EQ(rows.size(), 3u);
  size_t best = 0;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i]["val_mae"].get<double>() < rows[best]["val_mae"].get<double>()) best = i;
  EXPECT_NE(r.out.find("best: trial " + std::to_string(rows[best]["trial"].get<int>())),
            std::string::npos)
      << r.out;
  const CliRun again = run_crest("train --config " + out + "/best.yaml");
  ASSERT_EQ(again.code, 0) << again.out;
  const std::string trial_dir = out + "/trials/" + std::to_string(rows[best]["trial"].get<int>());
  test::expect_same_tensors(newest_checkpoint(trial_dir), newest_checkpoint(out + "/best"));
  // The same seed draws the same trials.
  const CliRun twin = run_crest(search_args(space, d.file("twin")) + " --trials 3 --seed 5");
  ASSERT_EQ(twin.code, 0) << twin.out;
  const auto twin_rows = final_rows(d.file("twin"));
  ASSERT_EQ(twin_rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(twin_rows[i]["lr_schedule.base_lr"], rows[i]["lr_schedule.base_lr"]);
    EXPECT_EQ(twin_rows[i]["val_mae"], rows[i]["val_mae"]);
  }
}

TEST(SearchCli, AshaPromotesFromTheCheckpointAndThePromotedTrialEqualsAStraightRun) {
  TempDir d;
  const std::string space =
      write_space(d,
                  "parameters:\n  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n"
                  "asha: {min_epochs: 1, max_epochs: 2, eta: 2}\n");
  const std::string out = d.file("study");
  const CliRun r = run_crest(search_args(space, out) + " --algorithm asha --trials 4");
  ASSERT_EQ(r.code, 0) << r.out;
  int completed = 0, pruned = 0;
  std::string promoted;
  for (const auto& row : final_rows(out)) {
    if (row["status"] == "completed") {
      ++completed;
      EXPECT_EQ(row["epoch"], 2);
      promoted = std::to_string(row["trial"].get<int>());
    }
    if (row["status"] == "pruned") {
      ++pruned;
      EXPECT_EQ(row["epoch"], 1);
    }
  }
  EXPECT_GE(completed, 1);
  EXPECT_GE(pruned, 1);
  EXPECT_EQ(completed + pruned, 4);
  // The study's page: the chart, a row per trial, and the promotion among the decisions.
  const std::string page = test::read_text(out + "/report.html");
  EXPECT_NE(page.find("<svg id=\"chart-trials\""), std::string::npos);
  for (const nlohmann::json& row : final_rows(out)) {
    const std::string cells = "<td>" + std::to_string(row["trial"].get<int>()) +
                              "</td><td class=\"l\">" + row["status"].get<std::string>() + "</td>";
    EXPECT_NE(page.find(cells), std::string::npos) << cells;
  }
  EXPECT_NE(page.find("trial " + promoted + " promoted to rung 2 (2 epochs)"), std::string::npos)
      << page;
  EXPECT_EQ(page.find("<script"), std::string::npos);
  // Epoch 1, paused, then resumed to epoch 2: the same bits as 2 epochs in one go.
  const std::string trial_dir = out + "/trials/" + promoted;
  const CliRun straight =
      run_crest("train --config " + trial_dir + "/config.yaml output_dir=" + d.file("straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  test::expect_same_tensors(newest_checkpoint(trial_dir), newest_checkpoint(d.file("straight")));
}

// The final rows and best.yaml of a study, its directory's name blanked out.
std::string outcome(const std::string& out) {
  std::string text;
  for (const auto& row : final_rows(out)) text += row.dump() + "\n";
  std::string best = test::read_text(out + "/best.yaml");
  for (size_t at; (at = best.find(out)) != std::string::npos;) best.replace(at, out.size(), "DIR");
  text += best;
  // Seconds differ between two runs of the same training; everything else must not.
  for (size_t at = 0; (at = text.find("\"seconds\":", at)) != std::string::npos;) {
    const size_t end = text.find(',', at);
    text.replace(at, end - at, "\"seconds\":_");
    ++at;
  }
  return text;
}

TEST(SearchCli, AStudyKilledMidTrialResumesToTheUninterruptedStudysResults) {
  TempDir d;
  const std::string space =
      write_space(d,
                  "parameters:\n  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n"
                  "asha: {min_epochs: 1, max_epochs: 4, eta: 2}\n");
  const std::string args = "search " + test::tiny_cosmoflow_args() + " data.n_epochs=4 --space " +
                           space + " --algorithm asha --trials 6";
  const CliRun straight = run_crest(args + " --out " + d.file("straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;

  const std::string out = d.file("killed");
  {
    test::BackgroundRun run(std::string(CREST_BINARY) + " " + args + " --out " + out,
                            d.file("killed.log"));
    // Trial 2 has begun (trials 0 and 1 have results, trial 0 may be mid-promotion): kill -9.
    ASSERT_TRUE(run.wait_for_file(out + "/trials/2/checkpoints")) << run.output();
    run.signal(SIGKILL);
    ASSERT_EQ(run.wait(), 128 + SIGKILL) << run.output();
  }
  ASSERT_FALSE(final_rows(out).size() == 6) << "the study ended before the kill";
  const CliRun resumed = run_crest("search --resume " + out);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resuming: "), std::string::npos) << resumed.out;
  EXPECT_EQ(outcome(out), outcome(d.file("straight")));
  // A finished study's directory is not started over by a second search.
  const CliRun again = run_crest(args + " --out " + out);
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.out.find("--resume " + out), std::string::npos) << again.out;
}

TEST(SearchCli, AStopSignalLeavesTheTrialRunningForResumeNotFailed) {
  TempDir d;
  const std::string space =
      write_space(d, "parameters:\n  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n");
  const std::string args = "search " + test::tiny_cosmoflow_args() + " data.n_epochs=4 --space " +
                           space + " --trials 3 --seed 4";
  const CliRun straight = run_crest(args + " --out " + d.file("straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const std::string out = d.file("stopped");
  {
    test::BackgroundRun run(std::string(CREST_BINARY) + " " + args + " --out " + out,
                            d.file("stopped.log"));
    ASSERT_TRUE(run.wait_for_file(out + "/trials/1/checkpoints")) << run.output();
    run.signal(SIGTERM);
    // Inside a run: a clean stop with a checkpoint (75); between runs: the signal's default.
    const int code = run.wait();
    EXPECT_TRUE(code == 75 || code == 128 + SIGTERM) << code << run.output();
    if (code == 75) {
      EXPECT_NE(run.output().find("continue with crest search --resume"), std::string::npos)
          << run.output();
    }
  }
  for (const auto& row : final_rows(out)) EXPECT_NE(row["status"], "failed") << row.dump();
  const CliRun resumed = run_crest("search --resume " + out);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_EQ(outcome(out), outcome(d.file("straight")));
}

}  // namespace
}  // namespace crest
