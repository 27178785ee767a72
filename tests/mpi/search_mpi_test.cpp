// `crest search` under mpirun: 4 ranks in 2 groups of 2, each group training its trials
// data-parallel. Every trial must end exactly where `crest train` with its config alone on 2
// ranks ends.
#include <gtest/gtest.h>

#include <set>

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

TEST(SearchMpi, RanksThatDoNotSplitIntoEqualGroupsAreAUsageError) {
  TempDir d;
  const std::string space = write_space(d, "parameters:\n  model.dropout: {uniform: [0, 0.5]}\n");
  const CliRun r = run_crest_mpi(3, "search " + tiny_args() + " --space " + space + " --out " +
                                        d.file("s") + " --ranks-per-trial 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--ranks-per-trial 2 does not divide the 3 ranks"), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace crest
