// Staging: copy this rank's sample files from the shared (parallel) file system to node-local
// storage before training, so the shared file system is read once per job instead of once per
// epoch (SPEC.md §1 "Staging", the MLPerf HPC practice).
//
// Which files: for each split directory (train/, validation/) the sorted file list, of which rank
// r of size takes files r, r + size, ... (the reference's files[rank::size]); top-level files
// (DeepCAM's stats.h5) go to every rank. With one process that is everything. The MPI issue adds
// the distributed mode (each rank reads a disjoint part, the node receives the rest by
// allgather) behind the same function.
//
// Every file is checksummed (CRC32C) while it is read, and its size on disk is checked after it
// is written; the checksums go into the manifest. With `inflate`, GZIP TFRecords are inflated to
// plain ones (every record's CRCs checked by the reader, the output parsed back) to trade local
// disk for CPU in every later epoch.
// Files are written under a temporary name and renamed, and a manifest
// (DST/.crest-stage.json: source, files, sizes, checksums) is written last: a destination with a
// manifest matching the source listing is reused as is; anything else already in DST is an
// error unless `overwrite`.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace crest {

class Communicator;

struct StageOptions {
  std::string from, to;
  bool inflate = false;    // GZIP TFRecords -> plain TFRecords
  bool overwrite = false;  // replace files already in `to`
  int threads = 0;         // files copied in parallel; 0 = 4
  std::vector<std::string> splits{"train", "validation"};
};

struct StageResult {
  int64_t files = 0;
  int64_t bytes_read = 0;     // from `from`
  int64_t bytes_written = 0;  // to `to`
  double seconds = 0;
  bool reused = false;        // an existing complete staging was found and kept
  double read_mb_s() const { return seconds > 0 ? static_cast<double>(bytes_read) / 1e6 / seconds : 0; }
};

// Throws crest::Error (input) naming the file and the defect (unreadable source, checksum
// mismatch after writing, disk full, existing files); files already staged stay intact.
StageResult stage_dataset(const StageOptions& options, const Communicator& comm, std::ostream& log);

}  // namespace crest
