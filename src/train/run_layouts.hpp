// The layout tuning a training run asks its backend for (crest.autotune), and how a resume keeps
// the layouts of the run it continues: layouts change rounding, so each rank's choices are
// recorded in the run directory (layouts.rank<k>.json) and a resume uses them. A resumed run
// whose directory has no record was not tuned, and is not tuned now either.
#pragma once
#include <string>

#include "crest/backends/layout_tuning.hpp"
#include "crest/train/config.hpp"

namespace crest {

// Where rank `rank` of a run in `run_dir` records its choices ("" without a run directory).
std::string layout_record_path(const std::string& run_dir, int rank);

// `run_dir` is "" when the run has no directory (a dry run, no output_dir).
LayoutTuning run_layout_tuning(const Config& config, const std::string& run_dir, int rank,
                               bool resume);

// One line for the run's log saying how layouts are chosen ("" for the fixed rule).
std::string describe_layout_tuning(const LayoutTuning& t);

}  // namespace crest
