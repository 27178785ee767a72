#include "last_batch_figures.hpp"

#include <algorithm>

namespace crest {
namespace {

constexpr size_t kLoss = 0, kRanks = 1, kMetrics = 2;

// Place `place` of a batch-first view, as a batch of one.
TensorView place_of(const TensorView& t, int64_t place) {
  TensorDesc d = t.desc();
  d.shape = t.shape().without_batch().with_batch(1);
  const size_t bytes = t.bytes() / static_cast<size_t>(t.shape()[0]);
  return TensorView(static_cast<char*>(t.data()) + static_cast<size_t>(place) * bytes, d);
}

}  // namespace

LastBatchFigures::LastBatchFigures(MetricScoring& scoring) : scoring_(scoring) {
  sums_.assign(kMetrics + scoring.sums(), 0.0);
}

void LastBatchFigures::record(double loss, const TensorView& pred, const LoadedBatch& batch) {
  std::fill(sums_.begin(), sums_.end(), 0.0);
  sums_[kLoss] = loss;
  sums_[kRanks] = 1;
  // Place by place: a batch with places left empty (a skipped bad sample) scores only its samples.
  for (int64_t place = 0; place < static_cast<int64_t>(batch.present.size()); ++place) {
    if (!batch.present[static_cast<size_t>(place)]) continue;
    scoring_.add(place_of(pred, place), place_of(batch.target, place), &sums_[kMetrics]);
  }
}

void LastBatchFigures::reduce(Communicator& comm, EpochStats& st) {
  comm.allreduce_sum(sums_.data(), sums_.size());
  const double ranks = sums_[kRanks];
  st.last_batch_loss = ranks > 0 ? sums_[kLoss] / ranks : 0;
  st.last_batch_metrics.clear();
  if (ranks > 0) st.last_batch_metrics = scoring_.values(&sums_[kMetrics]);
  std::fill(sums_.begin(), sums_.end(), 0.0);
}

}  // namespace crest
