// The performance report of a run: report.json (the numbers) and report.html (one self-contained
// page of them: inline CSS and SVG charts drawn here, no script, no network reference), written
// by `crest train` with train.report: true (into output_dir) and by `crest bench train --report
// DIR`. What the page shows and how to read it: docs/report.md.
//
// PerformanceReport is plain data so that both producers fill the same thing and the writer is
// testable without a run. Figures that cannot be measured (a layer that took no time, a NaN loss,
// no peak) are NaN here, `null` in the JSON and "–" on the page: never a made-up 0.
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/graph/executor.hpp"
#include "crest/graph/spatial_split.hpp"

namespace crest {

inline constexpr double kReportNaN = std::numeric_limits<double>::quiet_NaN();

// What ran: the facts printed at the top of the page.
// A validation metric the run measured (Metric::short_name and title).
struct ReportMetric {
  std::string name;   // "mae": JSON key val_mae, chart id chart-mae
  std::string title;  // "mean absolute error"
};

struct ReportRun {
  std::string source;                 // "crest train" or "crest bench train"
  std::string model;                  // the task's model name
  std::vector<ReportMetric> metrics;  // the task's validation metrics, in its order
  std::string config;                 // the config file (train), or the bench arguments
  std::string backend;
  std::string isa;     // the instruction sets it dispatches to ("" for reference)
  std::string status;  // train: "success"/"aborted"; bench: "measured"
  int ranks = 1, nodes = 1, threads = 1;  // threads: compute threads per rank
  int64_t batch_per_rank = 0, global_batch = 0;
  int64_t parameter_count = 0;
  int64_t steps_per_epoch = 0;                  // 0 for bench runs (no epochs)
  int64_t train_samples = 0, eval_samples = 0;  // per epoch, job-wide
  double train_flops_per_step = 0;              // one rank's forward + backward FLOPs of one step
  double samples_per_s = kReportNaN;            // the run's headline throughput (job-wide)
  double step_s = kReportNaN;                   // train: mean step; bench: best step
  double step_s_median = kReportNaN;            // bench only
};

// The figure "% of peak" divides by: one rank's fp32 GEMM rate with the rank's threads.
struct ReportPeak {
  double gflops = kReportNaN;  // NaN: no peak (the per-layer % column stays empty)
  std::string source;          // "measured", "given" or "none"
  std::string how;             // one sentence: how it was obtained
};

struct ReportEpoch {
  int epoch = 0;  // 1-based
  double lr = kReportNaN;
  double train_loss = kReportNaN;
  double val_loss = kReportNaN;     // NaN when the epoch was not validated
  std::vector<double> val_metrics;  // one per ReportRun::metrics; empty when not validated
  bool validated = false;
  double seconds = 0, train_seconds = 0, samples_per_s = 0;
  double data_wait_s = 0, allreduce_s = 0, allreduce_exposed_s = 0;
};

// One op of the compiled graph (layers and the reorders compile inserted), per training step.
struct ReportLayer {
  std::string name, kind;
  double forward_ms = 0, backward_ms = 0;  // mean time per profiled step
  double gflop_per_step = 0;               // forward + backward FLOPs of one step (one rank)
  double gflops = kReportNaN;              // achieved: NaN when the op took no measurable time
  double forward_gflops = kReportNaN, backward_gflops = kReportNaN;  // the same per direction
  double percent_of_peak = kReportNaN;  // NaN without a peak or without gflops
  // A spatially split windowed layer's halo exchange (empty / NaN for the others): how it runs
  // ("overlapped: ...", or why not), the exchanges' time per step from posting to completion,
  // the part the layer waited for, and 1 - exposed / exchange.
  std::string halo;
  double halo_exchange_ms = kReportNaN, halo_exposed_ms = kReportNaN;
  double halo_hidden_fraction = kReportNaN;
};

// Where the training steps' wall time went, job-wide means per rank, summed over the run.
// compute_s is what is left after the data wait and the exposed (not hidden) allreduce.
struct ReportTime {
  double steps_s = 0;              // wall time of the training steps (no validation)
  double data_wait_s = 0;          // steps waiting for input batches
  double allreduce_s = 0;          // gradient allreduce running (mostly hidden behind backward)
  double allreduce_exposed_s = 0;  // the part the steps waited for
  double validation_s = 0;         // outside the steps: validation passes
  double compute_s() const;        // steps_s - data_wait_s - allreduce_exposed_s, at least 0
};

struct PerformanceReport {
  ReportRun run;
  ReportPeak peak;
  std::vector<ReportEpoch> epochs;  // empty for bench runs
  std::vector<ReportLayer> layers;  // empty when profiling was off
  int64_t profiled_steps = 0;
  ReportTime time;
  std::vector<std::string> notes;  // caveats shown on the page and kept in the JSON
  std::string created;             // UTC, ISO 8601 (filled by write_report when empty)
};

// Per-layer rows from an executor's accumulated profile over `steps` profiled steps, with % of
// `peak_gflops` (NaN: none). Layers are kept in execution order.
std::vector<ReportLayer> report_layers(const std::vector<OpProfile>& ops, int64_t steps,
                                       double peak_gflops);
// The split layers' halo exchanges over `steps` steps (SpatialSplit::halo_layers) into their
// rows: how each exchange runs, milliseconds per step, and the hidden fraction (NaN where no
// exchange ran).
void add_halo_layers(std::vector<ReportLayer>& rows,
                     const std::vector<SpatialSplit::HaloLayer>& halo, int64_t steps);

// The time breakdown summed over epochs.
ReportTime report_time(const std::vector<ReportEpoch>& epochs);

// This machine's fp32 GEMM peak through the backend (`crest bench peak`'s code: a matmul n³,
// best of `iters` after a warm-up) with the backend's threads, described in `how`.
ReportPeak measure_report_peak(Backend& backend, int threads, int64_t n = 2048, int iters = 3);

// The document written to report.json, and the page written to report.html.
nlohmann::json report_json(const PerformanceReport& report);
std::string report_html(const PerformanceReport& report);

// Writes DIR/report.json and DIR/report.html, each atomically (a temporary file renamed into
// place), creating DIR. Throws crest::Error (input) naming the path that could not be written.
// Returns the path of report.html.
std::string write_report(const std::string& dir, const PerformanceReport& report);

// Checks before a run that `dir` can be created and written, so a bad output_dir fails before
// training rather than after it. Throws crest::Error (input) naming the path.
void check_report_dir(const std::string& dir);

}  // namespace crest
