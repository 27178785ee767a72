// Two trainings that must end with the same weights, bit for bit: a setting whose neutral value
// should change nothing (train.gradient_lag: 0, train.local_sgd steps 1).
#pragma once
#include <gtest/gtest.h>

#include <string>

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

}  // namespace crest::test
