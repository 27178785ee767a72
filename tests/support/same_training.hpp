// Checks on whole training runs under mpirun: two trainings that must end with the same weights
// bit for bit (a setting whose neutral value should change nothing, a resume), and settings that
// must be refused.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "support/cli_util.hpp"
#include "support/weights_compare.hpp"

namespace crest::test {

// `crest A` and `crest B` (each a `train ...` command line) as `ranks` MPI processes.
inline void expect_same_training(int ranks, const std::string& a, const std::string& b) {
  TempDir d;
  const auto first = run_crest_mpi(ranks, a + run_outputs(d, "a"));
  ASSERT_EQ(first.code, 0) << first.out;
  const auto second = run_crest_mpi(ranks, b + run_outputs(d, "b"));
  ASSERT_EQ(second.code, 0) << second.out;
  expect_same_tensors(d.file("a.safetensors"), d.file("b.safetensors"));
}

// `crest ARGS data.n_epochs=2` straight against `ARGS data.n_epochs=1` resumed to 2 epochs, as
// `ranks` processes: a resume at an epoch's end must continue bit for bit.
inline void expect_resume_after_an_epoch_is_exact(int ranks, const std::string& args) {
  TempDir d;
  const auto straight =
      run_crest_mpi(ranks, args + " data.n_epochs=2" + run_outputs(d, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto first = run_crest_mpi(ranks, args + " data.n_epochs=1 output_dir=" + d.file("split"));
  ASSERT_EQ(first.code, 0) << first.out;
  const auto resumed =
      run_crest_mpi(ranks, "train --resume " + d.file("split") +
                               " data.n_epochs=2 --save-weights " + d.file("split.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  expect_same_tensors(d.file("straight.safetensors"), d.file("split.safetensors"));
}

// Each `{overrides, says}` added to `args` with --dry-run exits 2 with a message naming `key` and
// saying `says`.
struct Refusal {
  std::string overrides, says;
};
inline void expect_refused(const std::string& args, const std::string& key,
                           const std::vector<Refusal>& refusals) {
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.overrides);
    const auto run = run_crest(args + r.overrides + " --dry-run");
    EXPECT_EQ(run.code, 2) << run.out;
    EXPECT_NE(run.out.find(key), std::string::npos) << run.out;
    EXPECT_NE(run.out.find(r.says), std::string::npos) << run.out;
  }
}

// A straight run's directory d/straight (its weights d/straight.safetensors) copied as if it had
// stopped at each checkpoint `kept[from]` and resumed by `resume` (which runs the `train --resume`
// command line it is given): each must end bit for bit where the straight run did.
inline void expect_resumes_end_as_straight(
    const TempDir& d, const std::vector<std::string>& kept, const std::vector<size_t>& froms,
    const std::function<CliRun(const std::string&)>& resume) {
  for (const size_t from : froms) {
    SCOPED_TRACE("resumed from " + kept[from]);
    const std::string run =
        run_stopped_at(d, d.file("straight"), kept, from, "resumed" + std::to_string(from));
    const CliRun resumed =
        resume("train --resume " + run + " --save-weights " + run + ".safetensors");
    ASSERT_EQ(resumed.code, 0) << resumed.out;
    EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
    expect_same_tensors(d.file("straight.safetensors"), run + ".safetensors");
  }
}

}  // namespace crest::test
