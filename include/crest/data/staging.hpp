// Staging: copy this rank's sample files from the shared (parallel) file system to node-local
// storage before training, so the shared file system is read once per job instead of once per
// epoch (SPEC.md §1 "Staging", the MLPerf HPC practice).
//
// One process copies every file (top-level files such as DeepCAM's stats.h5, then each split
// directory's sorted files).
//
// Several ranks (the distributed mode): every node ends up with the whole dataset in `to`
// (the loader's per-epoch global shuffle can hand any sample to any rank), while the shared file
// system serves each byte once per job: rank r reads files r, r + n, … of the listing, and the
// bytes travel to every other rank by allgather, in rounds of bounded size (at most 1 GiB per
// call, well below MPI's 2 GiB count limit, and at most 64 MiB per rank per round). On each
// node, file i is written by the rank whose local rank is i mod local_size, so a node's ranks
// share the writing. Each file's CRC32C is computed by its reader and checked by its writers.
// All ranks must see the same listing (checked). GZIP inflation is single-process only.
//
// Every file is checksummed (CRC32C) while it is read, and its size on disk is checked after it
// is written; the checksums go into the manifest. With `inflate`, GZIP TFRecords are inflated to
// plain ones (every record's CRCs checked by the reader, the output parsed back) to trade local
// disk for CPU in every later epoch.
// Files are written under a temporary name and renamed, and a manifest
// (DST/.crest-stage.json: source, files, sizes, checksums) is written last: a destination with a
// manifest matching the source listing is reused as is; anything else already in DST is an
// error unless `overwrite`.
//
// Parts (`StageOptions::parts`, a spatial split whose groups span nodes): a node stages only the
// bytes its ranks read of each file (an npy array's rows of their blocks, and its header). A
// partial file keeps its size and layout, the other bytes left as holes (a sparse file), so it
// is read as the whole file is; the manifest records the parts (`parts_text`), and a staging is
// reused only for the same parts. Then the node-aware exchange is not used: each node's ranks
// read their parts of the files they write (file i by local rank i mod L) from the shared file
// system directly.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "crest/core/byte_range.hpp"

namespace crest {

class Communicator;

struct StageOptions {
  std::string from, to;
  bool inflate = false;    // GZIP TFRecords -> plain TFRecords
  bool overwrite = false;  // replace files already in `to`
  int threads = 0;         // files copied in parallel; 0 = 4
  std::vector<std::string> splits{"train", "validation"};
  // Null: every file whole. Else, for the source file at `path` (`bytes` long), the ranges this
  // node stages, or none for the whole file; the same on every rank of a node, and thread-safe.
  // Throws crest::Error (input) naming the file when it cannot tell.
  std::function<std::vector<ByteRange>(const std::string& path, uint64_t bytes)> parts;
  // What `parts` stages, for the manifest and the messages ("blocks ... of [32, 32, 32] samples").
  std::string parts_text;
};

struct StageResult {
  int64_t files = 0;
  int64_t bytes_read = 0;     // from `from`
  int64_t bytes_written = 0;  // to `to` (a partial file's parts only)
  int64_t partial_files = 0;  // files staged in part (StageOptions::parts), on this node
  double seconds = 0;
  bool reused = false;  // an existing complete staging was found and kept
  // Distributed mode: job-wide totals (every rank has the same figures).
  int64_t files_read_job = 0;   // source files opened, summed over ranks (= files: once each)
  int64_t bytes_read_job = 0;   // bytes read from `from`, summed over ranks
  int64_t bytes_exchanged = 0;  // bytes this rank received from other ranks
  double exchange_mb_s() const {
    return seconds > 0 ? static_cast<double>(bytes_exchanged) / 1e6 / seconds : 0;
  }
  double read_mb_s() const {
    return seconds > 0 ? static_cast<double>(bytes_read) / 1e6 / seconds : 0;
  }
};

// Throws crest::Error (input) naming the file and the defect (unreadable source, checksum
// mismatch after writing, disk full, existing files); files already staged stay intact.
// Collective when comm.size() > 1 (every rank calls it with the same options).
StageResult stage_dataset(const StageOptions& options, Communicator& comm, std::ostream& log);

}  // namespace crest
