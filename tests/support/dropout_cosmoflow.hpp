// CosmoFlow at 32^3 with dropout 0.5, batch 2 and a fixed batch: the small network the tests of a
// training step's device-side bookkeeping run (the dropout counter, step graphs), where a host
// argument recomputed per step would show.
#pragma once
#include <memory>
#include <vector>

#include "crest/graph/executor.hpp"
#include "support/counting_backend.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest::test {

struct DropoutCosmoFlow {
  CosmoFlowModel model = build_cosmoflow(small_cosmoflow(32, 2, /*dropout=*/0.5));
  CompileOptions options() const {
    CompileOptions co;
    co.batch = 2;
    co.seed = 5;
    return co;
  }
  // The batch, written in place: host memory or the pretend device's.
  void fill(Executor& ex) const {
    fill_uniform(ex.input("x"), 3);
    fill_uniform(ex.input("y"), 4, -0.9, 0.9);
  }
};

// The network compiled twice from the same seed, with the same batch: on the pretend device and
// on the reference backend, whose results the device's must equal bit for bit.
struct DeviceAndHostPrograms {
  DeviceAndHostPrograms() {
    m.fill(on_device);
    m.fill(on_host);
  }
  DropoutCosmoFlow m;
  CountingBackend device{/*pretend_device=*/true};
  std::unique_ptr<Backend> host = make_backend("reference");
  Executor on_device{m.model.graph, device, m.options()};
  Executor on_host{m.model.graph, *host, m.options()};
};

// The parameters (float32) of a program in host memory.
inline std::vector<float> values_of(const Executor& ex) {
  const auto* v = static_cast<const float*>(ex.params().values());
  return {v, v + ex.params().bytes() / sizeof(float)};
}

}  // namespace crest::test
