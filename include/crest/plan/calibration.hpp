// crest plan calibrate: folds the JSON lines of crest's own benchmarks into a machine's
// measurements (docs/scaling.md, "Calibration").
//   crest bench train --profile, on one rank or on n ranks of one node with --independent: a
//     MeasuredTraining (per-layer times per sample, the optimizer's time); of two runs of the
//     same model, backend, precision, split, threads, ranks on the node and batch the one with
//     the faster best step is kept;
//   crest bench allreduce, on n ranks of one node (two sizes or more): the ring model's latency
//     and bandwidth, least squares over the sizes;
//   crest bench loader, on one rank (its end-to-end line): a MeasuredLoader; of two runs of the
//     same format, sample shape and threads the faster is kept.
// Other lines (bench peak, a multi-rank bench train that exchanged gradients, bench loader's
// per-block lines) are counted and left alone.
#pragma once
#include <istream>
#include <string>

#include "crest/plan/machine.hpp"

namespace crest {

struct CalibrationSummary {
  int trainings = 0, allreduce_fits = 0, loaders = 0, ignored_lines = 0;
};

// `source` names the input in errors ("bench.jsonl", "stdin"); a line that is not JSON is refused
// with its line number.
CalibrationSummary calibrate(Machine& machine, std::istream& lines, const std::string& source);

}  // namespace crest
