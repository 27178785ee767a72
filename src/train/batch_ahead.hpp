// The loader's next batch taken while the model is fed the one before it, so that on a device
// its copy runs while the model computes (BatchFeed::stage): crest train's steps within an epoch
// and crest predict's batches. A failure reading it waits for its turn (take), so what comes
// before it is done as without reading ahead.
#pragma once
#include <exception>
#include <optional>

#include "crest/data/loader.hpp"
#include "crest/train/batch_feed.hpp"

namespace crest {

class BatchAhead {
 public:
  // `feed` null: the batches are only held (a program that feeds its micro-batches itself).
  BatchAhead(DataLoader& loader, BatchFeed* feed) : loader_(loader), feed_(feed) {}
  BatchAhead(const BatchAhead&) = delete;
  BatchAhead& operator=(const BatchAhead&) = delete;
  ~BatchAhead();

  // Takes the loader's next batch and stages it; an error doing so is kept for take().
  void read();
  // The batch read ahead, else the loader's next. Rethrows the error of reading it ahead (its
  // batch, if it had one, back to the loader first).
  LoadedBatch take();
  // Gives `batch` back to the loader once the copies reading it are done.
  void release(const LoadedBatch& batch);
  // Gives the batch read ahead back unused (the epoch's loop ends early, a rollback).
  void drop();

 private:
  DataLoader& loader_;
  BatchFeed* feed_;
  std::optional<LoadedBatch> batch_;
  std::exception_ptr error_;
};

}  // namespace crest
