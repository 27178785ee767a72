// TensorBoard event files: scalars (loss, accuracy, learning rate, throughput) that TensorBoard
// and anything built on its EventAccumulator can plot while a run is still going.
//
// The file is what TensorFlow's and PyTorch's writers produce: a plain TFRecord file whose
// records are serialized tensorflow.Event protos, named
// `events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.<counter>`, the first record
// carrying `file_version: "brain.Event:2"`. Only the few proto fields a scalar needs are written:
//   Event         { double wall_time = 1; int64 step = 2; string file_version = 3;
//                   Summary summary = 5; }
//   Summary       { repeated Value value = 1; }
//   Summary.Value { string tag = 1; float simple_value = 2; }
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace crest {

// Appends events to one new event file in a log directory. Not thread-safe: one writer per
// thread (the trainer writes from its own loop). Move-only.
//
// Unlike crest's other writers (TfRecordWriter, checkpoints, weights) this one does not write a
// temporary file and rename it on close: TensorBoard reads event files while training runs and
// follows the file it first found by name, and a crashed run should still leave every event up
// to its last flush(). So records are appended in place, each one whole: an event is encoded and
// framed in memory, and flush() hands complete records to the kernel, so a reader (or a crash)
// sees at most a last record cut short, which TensorBoard treats as "not written yet".
class TensorBoardWriter {
 public:
  // Creates `logdir` (and its parents) if needed, creates a new event file in it and writes the
  // file_version record, flushed, so the file is a valid, readable event file from the start.
  // Throws crest::Error (input) naming the directory or file if either cannot be created.
  explicit TensorBoardWriter(const std::string& logdir);
  // Flushes and closes. Errors cannot be thrown from here; they are reported on stderr. Call
  // close() to have them thrown instead.
  ~TensorBoardWriter();
  TensorBoardWriter(TensorBoardWriter&& other) noexcept;
  TensorBoardWriter& operator=(TensorBoardWriter&& other) noexcept;
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Seconds since the Unix epoch, as the wall_time of events.
  static double now();

  // Queues one event with the scalar `value` for `tag` at `step`. TensorBoard stores scalars as
  // float32, so `value` is rounded to float (NaN and infinities pass through; finite values
  // beyond float's range become infinities). Nothing reaches the file before flush() unless
  // more than kAutoFlushBytes are queued.
  void scalar(const std::string& tag, int64_t step, double value, double wall_time_s = now());

  // Writes every queued event to the file (no fsync: the event file is a log, not a checkpoint,
  // and an fsync per flush would stall training on parallel file systems). Call it after each
  // batch of events, e.g. once per logging interval or epoch. Throws crest::Error (input) naming
  // the file on a write failure (disk full, quota, I/O error); after one, every later call
  // throws too, since the file may end in a partial record.
  void flush();
  // Flushes and closes the file; later calls to scalar() or flush() throw. Idempotent.
  void close();

  // The event file's path: logdir/events.out.tfevents.....
  const std::string& path() const;

  // Queued bytes above which scalar() flushes by itself, so an unflushed writer stays small.
  static constexpr size_t kAutoFlushBytes = size_t{1} << 20;

 private:
  void append_event(const std::string& event);  // frames one serialized Event into pending_
  void check_open() const;
  void close_or_warn() noexcept;  // close(), reporting an error on stderr instead of throwing

  std::string path_;
  int fd_ = -1;
  std::string pending_;     // complete framed records not yet written
  uint64_t committed_ = 0;  // bytes of whole records in the file
  bool failed_ = false;     // a write failed: no more events go to this file
};

}  // namespace crest
