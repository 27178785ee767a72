#include "run_status.hpp"

#include <nlohmann/json.hpp>

#include "crest/core/atomic_file.hpp"

namespace crest {

void write_run_status(const std::string& dir, const RunStatus& s) {
  nlohmann::ordered_json j;
  j["state"] = s.state;
  if (!s.status.empty()) j["status"] = s.status;
  if (!s.reason.empty()) j["reason"] = s.reason;
  j["resumable"] = s.resumable;
  j["epochs_done"] = s.epochs_done;
  j["step_in_epoch"] = s.step_in_epoch;
  j["global_step"] = s.global_step;
  j["checkpoint"] = s.checkpoint;
  if (!s.resume.empty()) j["resume"] = s.resume;
  j["exit_code"] = s.exit_code;
  if (s.loss_scale > 0) {
    j["loss_scale"] = s.loss_scale;
    j["overflow_steps"] = s.overflow_steps;
  }
  write_file_atomically(dir + "/status.json", j.dump(2) + "\n");
}

}  // namespace crest
