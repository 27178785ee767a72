#include "validation.hpp"

#include "pass_sums.hpp"
#include "rank_failure.hpp"
#include "test_faults.hpp"

namespace crest {
namespace {

void validate_complete(Executor& ex, BatchFeed& feed, const LoadedBatch& b, PassSums& sums) {
  feed.feed(b);
  ex.forward(false);
  const int64_t batch = b.sample.shape()[0];
  sums.add_pass(ex, batch, batch);
  if (sums.has_metrics()) sums.add_metrics(feed.host_prediction(), b.target);
}

void validate_sample_by_sample(Executor& ex, BatchFeed& feed, const LoadedBatch& b,
                               PassSums& sums) {
  const int64_t batch = b.sample.shape()[0];
  for (int64_t place = 0; place < batch; ++place) {
    if (!b.present[static_cast<size_t>(place)]) continue;
    feed.feed_copies_of(b, place);
    ex.forward(false);
    sums.add_pass(ex, 1, batch);
    if (!sums.has_metrics()) continue;
    // One copied sample's pass is scored on its first place.
    sums.add_metrics(samples_of(feed.host_prediction(), 0, 1), samples_of(b.target, place, 1));
  }
}

void validate_batch(Executor& ex, BatchFeed& feed, DataLoader& loader, PassSums& sums,
                    bool test_failure) {
  const LoadedBatch b = loader.next();
  if (test_failure) {
    loader.release(b);
    throw_input(
        "test fault: a validation batch could not be read "
        "(CREST_TEST_VALIDATION_FAILURE_AT_EPOCH)");
  }
  if (b.complete())
    validate_complete(ex, feed, b, sums);
  else
    validate_sample_by_sample(ex, feed, b, sums);
  loader.release(b);
}

}  // namespace

ValidationResult validate(Executor& ex, BatchFeed& feed, DataLoader& loader, MetricScoring& scoring,
                          Communicator& comm, int epoch) {
  PassSums sums(scoring);
  RankFailure failure;
  loader.start_epoch(epoch);
  for (int64_t s = 0; s < loader.plan().batches; ++s) {
    try {
      validate_batch(ex, feed, loader, sums,
                     s == 0 && validation_failure_asked(epoch + 1, comm.rank()));
    } catch (const std::exception& e) {
      // On more than one rank: the others are validating towards the final sum; this rank goes
      // there at once, and the sum tells every rank that it failed.
      if (comm.size() == 1) throw;
      failure.record(e);
      break;
    }
  }
  return sums.reduce(comm, loader.stats().skipped, failure, epoch);
}

}  // namespace crest
