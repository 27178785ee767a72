#include "batch_ahead.hpp"

#include <utility>

namespace crest {

BatchAhead::~BatchAhead() {
  try {
    drop();
  } catch (const std::exception&) {  // a device error while unwinding: the next call reports it
  }
}

void BatchAhead::read() {
  drop();
  try {
    batch_ = loader_.next();
    if (feed_) feed_->stage(*batch_);
  } catch (const std::exception&) {
    error_ = std::current_exception();
  }
}

LoadedBatch BatchAhead::take() {
  if (error_) {
    std::exception_ptr error = std::exchange(error_, nullptr);
    drop();
    std::rethrow_exception(error);
  }
  if (!batch_) return loader_.next();
  LoadedBatch b = *batch_;
  batch_.reset();
  return b;
}

void BatchAhead::release(const LoadedBatch& batch) {
  if (feed_) feed_->done_with(batch);  // a staged batch's copies may still be reading it
  loader_.release(batch);
}

void BatchAhead::drop() {
  if (batch_) release(*batch_);
  batch_.reset();
  error_ = nullptr;
}

}  // namespace crest
