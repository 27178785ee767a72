// Batches in buffers of a program's memory, bound to its inputs x and y in turn, as BatchFeed
// binds its two: the tests of step graphs, whose recordings are keyed by the inputs' addresses.
#pragma once
#include <cstddef>
#include <vector>

#include "crest/core/tensor.hpp"
#include "crest/graph/executor.hpp"
#include "support/host_copy.hpp"
#include "support/test_util.hpp"

namespace crest::test {

struct BoundBatches {
  // `batches` batches shaped as `ex`'s planned inputs (call before binding any), batch b's x
  // uniform in [-1, 1) from seed 10 + b, its y in [-0.9, 0.9) from seed 20 + b.
  BoundBatches(Executor& ex, int batches) {
    MemoryResource& memory = ex.backend().memory();
    for (int b = 0; b < batches; ++b)
      for (const char* name : {"x", "y"}) {
        const TensorView planned = ex.input(name);
        buffers.emplace_back(planned.bytes(), 256, memory);
        const bool labels = name[0] == 'y';
        write_host(memory, TensorView(buffers.back().data(), planned.desc()),
                   [&](const TensorView& t) {
                     fill_uniform(t, (labels ? 20 : 10) + b, labels ? -0.9 : -1, labels ? 0.9 : 1);
                   });
      }
  }
  void bind(Executor& ex, int batch) const {
    ex.bind_input("x", buffers[2 * static_cast<size_t>(batch)].data());
    ex.bind_input("y", buffers[2 * static_cast<size_t>(batch) + 1].data());
  }
  std::vector<Buffer> buffers;
};

}  // namespace crest::test
