// Faults on request, for tests of what a run does when things go wrong (docs/testing.md). Each
// is read from the environment, never from a config: a production run cannot turn one on by a
// typo in its YAML.
//
//   CREST_TEST_NONFINITE_AT_STEP=G[@R]   the input batch of global step G (1-based) gets a NaN
//                                        (in a pipeline, the batch the first stage feeds),
//                                        on rank R only (every rank without @R); once per
//                                        process, so a rollback that passes step G again goes on
//                                        (a transient fault, like one corrupt sample).
//   CREST_TEST_GRAD_OVERFLOW_AT_STEP=G[@R]
//                                        the first gradient backward finishes in global step G
//                                        gets an infinity, on rank R only (every rank without
//                                        @R), before it is summed or exchanged; once per process.
//                                        With train.loss_scaling: dynamic an overflow (the update
//                                        is skipped, the scale backs off), else a non-finite
//                                        gradient for train.on_nonfinite.
//   CREST_TEST_BATCH_FAILURE_AT_STEP=G[@R]
//                                        reading the batch of global step G fails (an input
//                                        error, as a damaged file gives), on rank R only (every
//                                        rank without @R); once per process.
//   CREST_TEST_VALIDATION_FAILURE_AT_EPOCH=E[@R]
//                                        reading the first validation batch of epoch E (1-based)
//                                        fails likewise; once per process.
//   CREST_TEST_READ_AHEAD=1|0            crest train reads the next step's batch ahead on host
//                                        memory too (TrainOptions::read_ahead), so the path a
//                                        GPU run takes is tested on a CPU; 0: not even on a GPU
//                                        (the device check's run without the overlap).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "crest/data/loader.hpp"
#include "crest/graph/executor.hpp"

namespace crest {

// Writes a NaN into `input` of `ex` when CREST_TEST_NONFINITE_AT_STEP asks for `global_step`
// on `rank`. Returns whether it did.
bool inject_nonfinite_input_if_asked(Executor& ex, const std::string& input, int64_t global_step,
                                     int rank);
// The same into the samples of a loaded batch (in host memory), for a pipeline's first stage,
// which feeds them micro-batch by micro-batch.
bool inject_nonfinite_sample_if_asked(const LoadedBatch& batch, int64_t global_step, int rank);

// Whether CREST_TEST_GRAD_OVERFLOW_AT_STEP asks for `global_step` on `rank`; true at most once
// per process.
bool gradient_overflow_asked(int64_t global_step, int rank);
// Whether CREST_TEST_BATCH_FAILURE_AT_STEP asks for `global_step` on `rank`; true at most once
// per process.
bool batch_failure_asked(int64_t global_step, int rank);
// Whether CREST_TEST_VALIDATION_FAILURE_AT_EPOCH asks for `epoch` (1-based) on `rank`; true at
// most once per process.
bool validation_failure_asked(int epoch, int rank);
// What CREST_TEST_READ_AHEAD asks, whatever the memory: to read ahead (1), not to (0), nothing
// (unset). Another value is a usage error naming the variable.
std::optional<bool> read_ahead_forced();

}  // namespace crest
