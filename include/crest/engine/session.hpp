// The engine session: the one place that turns "this graph, on this backend, for this purpose"
// into a backend and a compiled executor. crest train, predict, export and both benches open one
// (docs/architecture.md, "Folders"), so the compile flags that go with a purpose, the order the
// backend is set up in and the precision's dtypes are decided here and nowhere else.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "crest/backends/kernels.hpp"
#include "crest/backends/layout_tuning.hpp"
#include "crest/engine/precision.hpp"
#include "crest/graph/executor.hpp"
#include "crest/graph/graph.hpp"

namespace crest {

// What an executor is compiled for.
enum class Purpose {
  training,   // forward, losses, gradients (crest train, bench train)
  inference,  // forward only, loss layers left out: samples need no targets (predict, bench infer)
  weights,    // forward only, loss layers kept: weights to export and check (crest export)
};

struct SessionOptions {
  std::string backend = default_backend_name();
  int threads = 0;  // compute threads; 0 leaves the backend's default (OpenMP's, on the CPUs)
  // Applied after the threads: the layout cache is keyed by a machine signature that includes
  // them. Unset: the backend's fixed layout rule.
  std::optional<LayoutTuning> layout_tuning;
  Purpose purpose = Purpose::training;
  Precision precision = Precision::float32;
  int64_t batch = 1;
  uint64_t seed = 0;  // parameter initialisation and dropout masks
  // A spatial split of every sample among a group of ranks (crest/spatial/spatial_program.hpp);
  // null: none.
  std::shared_ptr<SpatialSplit> spatial;
  bool split_outputs = false;  // CompileOptions::split_outputs
  // CompileOptions::memory_limit (0: none) and its source, allocate (false: plan only),
  // allocate_params and param_gradients. The limit is the host's: a backend that knows its own
  // memory's (a GPU's free memory, Backend::memory_capacity) replaces it, unless the user set it
  // (crest.max_memory_gb: memory_limit_set).
  size_t memory_limit = 0;
  std::string memory_limit_source;
  bool memory_limit_set = false;
  MemoryBeside beside{};  // CompileOptions::beside (compile_options adds the next batch's inputs)
  // The caller copies the next batch while the program reads this one (BatchFeed::stage, crest
  // train and predict reading ahead): on a backend whose memory is a device's, one more set of
  // the program's inputs (MemoryBeside::input_sets).
  bool stages_batches = false;
  bool allocate = true;
  bool allocate_params = true;
  bool param_gradients = true;
};

// The compile options a purpose and precision mean. Under mixed precision a float input that
// only 16-bit layers read is stored 16-bit: every caller writes its batch through BatchFeed or
// fill_random_batch, which narrow it.
CompileOptions compile_options(const SessionOptions& options, const Backend& backend);

class Session {
 public:
  // Makes the backend, sets its threads and layout tuning, compiles `graph` (which must outlive
  // the session). Errors are the backend's and the compiler's (they name the layer).
  Session(const Graph& graph, const SessionOptions& options);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Backend& backend() const { return *backend_; }
  Executor& executor() const { return *executor_; }
  // The threads the backend computes with when some were asked (the reference backend: 1);
  // 0 when left at its default.
  int threads() const { return threads_; }
  double compile_seconds() const { return compile_s_; }

 private:
  std::unique_ptr<Backend> backend_;    // declared first: the executor's kernels use it
  std::unique_ptr<Executor> executor_;  // so it is destroyed first
  int threads_ = 0;
  double compile_s_ = 0;
};

}  // namespace crest
