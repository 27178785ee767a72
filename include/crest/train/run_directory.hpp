// The run directory (output_dir, docs/run-directory.md): what `crest train` checks and writes
// there before training starts, and how `--resume` finds where to continue.
//
// Only rank 0 touches output_dir (on a cluster it may be visible to rank 0 alone). Whatever rank
// 0 finds wrong is sent to every rank, so all ranks fail together with the same message instead
// of the others waiting in a collective for a rank that has given up.
#pragma once
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/train/checkpoint.hpp"
#include "crest/train/config.hpp"

namespace crest {

class Communicator;

struct RunDirectory {
  std::string checkpoint_dir;  // output_dir/checkpoints ("" without an output_dir)
  std::string resume_from;     // the checkpoint to continue from (rank 0; "" for a fresh run)
  std::optional<CheckpointInfo> resume_info;  // its metadata, checksum verified (rank 0)
  // Newer checkpoints that were damaged and skipped, one line each: file, defect, new name.
  std::vector<std::string> skipped;
};

// Prepares `config.output_dir` for a run, on every rank (collective):
//  - fresh run: refuses a directory that already holds checkpoints (they belong to another run:
//    continue it with --resume, or pass --overwrite to delete them first);
//  - resume: finds the newest checkpoint that verifies (damaged newer ones are set aside and
//    listed in `skipped`) and refuses it when the new config changes what a checkpoint cannot
//    carry over (the model, the optimizer);
//  - writes output_dir/config.yaml (the resolved config, atomically).
// Throws crest::Error (input) on every rank alike, naming the path and the problem.
RunDirectory prepare_run_directory(const Config& config, bool resume, bool overwrite,
                                   Communicator& comm);

// Why the data position saved in `info` cannot be continued by this job (different ranks, batch
// size, steps per epoch, shuffle seed mid-epoch), or "" when it can. At an epoch boundary only
// the model and the optimizer matter: the next epoch's order depends on nothing saved.
std::string resume_position_problem(const CheckpointInfo& info, const Config& config, int ranks,
                                    int64_t steps_per_epoch);

// Sends rank 0's `problem` to every rank; throws it (input) everywhere when it is not empty.
void fail_with_rank0(Communicator& comm, const std::string& problem);
// Sends rank `root`'s `text` to every rank.
void broadcast_text(Communicator& comm, std::string& text, int root = 0);

// Rank 0's log, also appended to output_dir/train.log (a fresh run starts the file anew).
class RunLog {
 public:
  // `to` is where the log goes already (stdout); `path` empty: no file.
  RunLog(std::ostream& to, const std::string& path, bool append);
  ~RunLog();
  std::ostream& stream();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crest
