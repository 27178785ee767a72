// The messages between group leaders and the scheduler (src/search, internal): JSON objects,
// sent as bytes over the world communicator's point-to-point messages (tag kToScheduler to world
// rank 0, kToLeader back). World rank 0's own group hands the same objects to the coordinator
// directly.
//
//   {"op": "next", "group": g}                          -> a Work reply
//   {"op": "epoch", "trial": t, "group": g, "epoch": e, "metric": m,
//    "figures": {"train_loss": x, "val_loss": y, "val_mae": z}, "seconds": s}   (no reply)
//   {"op": "end", "trial": t, "group": g, "ok": b, "stopped_early": b, "message": s} (no reply)
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <vector>

#include "crest/search/scheduler.hpp"

namespace crest::search_detail {

inline constexpr int kToScheduler = 7101, kToLeader = 7102;

std::vector<std::byte> to_bytes(const nlohmann::json& j);
nlohmann::json from_bytes(const std::vector<std::byte>& b);

nlohmann::json work_to_json(const Work& w);
Work work_from_json(const nlohmann::json& j);

}  // namespace crest::search_detail
