// `crest predict`: a trained model over every sample of a split, sharded over the job's ranks,
// into an HDF5 file of one row per sample (docs/inference.md). The model is compiled for
// inference (no backward, batch norm folded, activations freed after their last reader).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "crest/train/config.hpp"
#include "crest/train/metric.hpp"

namespace crest {

struct PredictOptions {
  std::string checkpoint;            // a checkpoint file, or a run directory (its newest)
  std::string weights;               // or a safetensors weights file
  std::string split = "validation";  // "train", "validation" or a directory of sample files
  std::string out;                   // the HDF5 file (the index of the parts under MPI)
  bool overwrite = false;            // replace an existing `out`
  bool skip_bad = false;             // skip (and report) bad sample files instead of failing
  bool probabilities = false;        // segmentation: also the class probabilities (float16)
};

struct PredictSummary {
  int64_t samples = 0, skipped = 0;  // job-wide
  std::vector<MetricValue> metrics;  // over every predicted sample ("val_mae", "val_iou")
  double seconds = 0;                // the prediction loop, slowest rank
  double samples_per_s = 0;
  double read_bytes_per_s = 0;             // sample payload read from files
  std::vector<std::string> files_written;  // `out`, and the part files under MPI
};

// The part file of `rank` of `ranks` that an index `out` names (beside it).
std::string prediction_part_path(const std::string& out, int rank, int ranks);

// Runs `crest predict`. Progress and the summary go to `log` (rank 0). Throws crest::Error:
// usage or input (exit 2) for a bad config, weights, output path or sample file, before anything
// is written under `out`.
PredictSummary run_prediction(const Config& config, const PredictOptions& options,
                              std::ostream& log);

}  // namespace crest
