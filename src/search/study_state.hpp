// What a study keeps in its directory to be resumed (src/search, internal): study.json (the
// options it was started with, paths absolute) and state.json (the scheduler's state, rewritten
// atomically after each decision).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "crest/search/scheduler.hpp"
#include "crest/search/study.hpp"

namespace crest::search_detail {

void write_study_options(const StudyOptions& o);  // out_dir/study.json

nlohmann::json state_to_json(const SchedulerState& s);
SchedulerState state_from_json(const nlohmann::json& j);
void write_state(const std::string& dir, const SchedulerState& s);  // dir/state.json
SchedulerState read_state(const std::string& dir);

}  // namespace crest::search_detail
