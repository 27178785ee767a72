// PBT's transfer of a trial's state between groups (src/search, internal): the donor group's
// leader sends its trial's newest checkpoint file (weights, optimizer state, position, history)
// as one point-to-point message; the receiver's leader writes it into its own trial directory
// and the group resumes from it. Over MPI, not through a shared file system: the donor's run
// directory may be on its own node.
#pragma once
#include <atomic>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "crest/dist/communicator.hpp"

namespace crest::search_detail {

inline constexpr int kWantCheckpoint = 7103, kCheckpointBytes = 7104;

// On each group leader of a PBT study: answers other leaders' requests for a trial's checkpoint
// at the end of an epoch, from a thread, until destroyed.
class CheckpointServer {
 public:
  CheckpointServer(Communicator& world, std::string out_dir);
  ~CheckpointServer();
  CheckpointServer(const CheckpointServer&) = delete;
  CheckpointServer& operator=(const CheckpointServer&) = delete;

 private:
  void serve();
  Communicator& world_;
  std::string out_dir_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

struct FetchedCheckpoint {
  std::string name;  // the donor's file name (ckpt-<step>.safetensors)
  std::vector<std::byte> bytes;
  double seconds = 0;  // request to last byte
};

// Asks world rank `donor_leader` for trial `donor`'s checkpoint at the end of epoch `epoch`.
FetchedCheckpoint fetch_checkpoint(Communicator& world, int donor_leader, int donor, int epoch);

// Replaces the checkpoints in `run_dir`/checkpoints by `c` (written atomically); returns its path.
std::string install_checkpoint(const std::string& run_dir, const FetchedCheckpoint& c);

}  // namespace crest::search_detail
