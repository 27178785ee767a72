// MLPerf logging: the `:::MLLOG {...}` lines that the mlperf-logging package (mlcommons/logging,
// mllog/mllog.py) writes and its compliance checker reads (reference/SPEC.md §4):
//
//   :::MLLOG {"namespace": "", "time_ms": 1700000000123, "event_type": "POINT_IN_TIME",
//             "key": "eval_error", "value": 0.1187, "metadata": {"file": "src/train/...",
//             "lineno": 97, "epoch_num": 12}}
//
// (one line in the file). The JSON is spelled the way Python's json.dumps spells it (", " and
// ": " separators, keys in that order, non-ASCII as \uXXXX), so crest's lines look like the
// reference's, with one deliberate difference: a non-finite number becomes null. Python writes the
// bare tokens NaN/Infinity, which are not JSON (RFC 8259) and make strict readers (jq, nlohmann,
// JavaScript) reject the whole line; the checker's json.loads reads null just as well.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <source_location>
#include <string>
#include <string_view>

namespace crest {

// A line's value or metadata. ordered_json keeps keys in the order they were added.
using MllogValue = nlohmann::ordered_json;

enum class MllogEventType { interval_start, interval_end, point_in_time };

// "INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME".
const char* mllog_event_type_name(MllogEventType type);

// `v` as JSON text, byte for byte as Python's json.dumps writes it: integers as integers; doubles
// as repr(float) spells them (the shortest digits that read back to the same double; "3.0",
// "0.0001", "1e-05", "1e+16"), so a float reads back as a float; NaN and ±infinity as null;
// strings escaped as with ensure_ascii (", \, control characters, everything above U+007F as
// \uXXXX, surrogate pairs beyond the BMP; a byte that is not valid UTF-8 becomes U+FFFD).
std::string mllog_json(const MllogValue& v);

// The "file" of a call site: __FILE__ from the repository's top folder on (src/train/x.cpp), so
// logs do not depend on where the source tree was checked out; other paths unchanged.
std::string mllog_source_file(std::string_view file);

// Milliseconds since the Unix epoch, truncated (Python: int(time.time() * 1e3)).
int64_t mllog_now_ms();

// One complete line, without the newline. `metadata` must be an object (or null for none); the
// call site's "file" and "lineno" come first, then its entries (which must not repeat them).
std::string mllog_line(int64_t time_ms, MllogEventType type, std::string_view key,
                       const MllogValue& value, const MllogValue& metadata,
                       const std::source_location& where);

// Appends MLPerf log lines to one file. Every line goes to the kernel in one write() as soon as it
// is logged (no buffering in crest: a crash leaves every earlier line, whole), and is echoed to
// `echo` when one is given. Not thread-safe: one writer, used from the training loop.
//
// A fresh log (append = false) never destroys an earlier one: if `path` exists, the old file is
// moved aside first to the first free name of <stem>.1<ext>, <stem>.2<ext>, ... (mllog.1.txt;
// higher numbers are newer) without replacing anything (renameat2 RENAME_NOREPLACE), so two runs
// sharing an output directory each keep their own log. append = true (a resumed run) adds to the
// existing file instead.
class MllogWriter {
 public:
  struct Options {
    bool append = false;
    std::ostream* echo = nullptr;  // e.g. stdout (config mlperf.stdout)
  };

  // Creates the parent directories and the file. Throws crest::Error (input) naming the path
  // that cannot be created, moved aside or opened.
  MllogWriter(std::string path, Options options);
  ~MllogWriter();
  MllogWriter(const MllogWriter&) = delete;
  MllogWriter& operator=(const MllogWriter&) = delete;

  // Python mllog's start (INTERVAL_START), end (INTERVAL_END) and event (POINT_IN_TIME). The call
  // site is the "file"/"lineno" metadata. Throws crest::Error (input) naming the file on a write
  // failure (disk full, quota, I/O error); after one, every later call throws too.
  void start(std::string_view key, const MllogValue& value = nullptr,
             const MllogValue& metadata = nullptr,
             std::source_location where = std::source_location::current());
  void end(std::string_view key, const MllogValue& value = nullptr,
           const MllogValue& metadata = nullptr,
           std::source_location where = std::source_location::current());
  void event(std::string_view key, const MllogValue& value = nullptr,
             const MllogValue& metadata = nullptr,
             std::source_location where = std::source_location::current());
  // The general form, with an explicit time (tests).
  void log(MllogEventType type, std::string_view key, const MllogValue& value,
           const MllogValue& metadata, const std::source_location& where, int64_t time_ms);

  const std::string& path() const { return path_; }
  // Where a previous log at path() was moved (empty when there was none, or when appending).
  const std::string& moved_previous_to() const { return moved_to_; }

 private:
  std::string path_;
  std::string moved_to_;
  std::ostream* echo_ = nullptr;
  int fd_ = -1;
  bool failed_ = false;
};

}  // namespace crest
