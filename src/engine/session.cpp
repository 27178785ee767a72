#include "crest/engine/session.hpp"

#include <chrono>

namespace crest {

CompileOptions compile_options(const SessionOptions& o, const Backend& backend) {
  CompileOptions co;
  co.batch = o.batch;
  co.seed = o.seed;
  co.dtype = precision_dtype(o.precision);
  co.half = precision_half(o.precision);
  co.half_inputs = true;
  co.training = o.purpose == Purpose::training;
  co.loss = o.purpose != Purpose::inference;
  co.spatial = o.spatial;
  co.split_outputs = o.split_outputs;
  co.memory_limit = o.memory_limit;
  co.memory_limit_source = o.memory_limit_source;
  if (const Backend::MemoryCapacity own = backend.memory_capacity();
      own.bytes > 0 && !o.memory_limit_set) {
    co.memory_limit = own.bytes;
    co.memory_limit_source = own.source;
  }
  co.beside = o.beside;
  if (o.stages_batches && !backend.memory().is_host()) co.beside.input_sets += 1;
  co.allocate = o.allocate;
  co.allocate_params = o.allocate || o.allocate_params;
  co.param_gradients = o.allocate || o.param_gradients;
  return co;
}

Session::Session(const Graph& graph, const SessionOptions& o) : backend_(make_backend(o.backend)) {
  if (o.threads > 0) threads_ = backend_->set_threads(o.threads);
  if (o.layout_tuning) backend_->set_layout_tuning(*o.layout_tuning);
  const auto t0 = std::chrono::steady_clock::now();
  executor_ = std::make_unique<Executor>(graph, *backend_, compile_options(o, *backend_));
  compile_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace crest
