// Progress of a long operation (datagen, staging, loading) on stderr: a self-overwriting line when
// stderr is a terminal, otherwise a plain line every `interval_s` seconds, so batch-job logs stay
// clean. Thread-safe: workers call advance() as they finish items.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace crest {

class Progress {
 public:
  // `visible` false: counts and times, prints nothing (ranks other than 0 of a parallel job).
  Progress(std::string label, int64_t total_items, double interval_s = 10.0, bool visible = true);
  // Records `items` more finished items carrying `bytes` bytes; prints when due.
  void advance(int64_t items, int64_t bytes = 0);
  // Prints the final line (always) and returns it.
  std::string finish();
  double elapsed_s() const;
  int64_t bytes() const;

 private:
  std::string line_locked() const;
  std::string label_;
  int64_t total_, done_ = 0, bytes_ = 0;
  double interval_s_;
  bool tty_;
  bool visible_;
  std::chrono::steady_clock::time_point start_, last_print_;
  mutable std::mutex mu_;
};

}  // namespace crest
