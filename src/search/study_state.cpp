// study.json and state.json (study_state.hpp).
#include "study_state.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"

namespace crest::search_detail {
namespace {

const char* algorithm_name(SearchAlgorithm a) {
  switch (a) {
    case SearchAlgorithm::grid:
      return "grid";
    case SearchAlgorithm::asha:
      return "asha";
    case SearchAlgorithm::pbt:
      return "pbt";
    case SearchAlgorithm::random:
      break;
  }
  return "random";
}

SearchAlgorithm algorithm_from(const std::string& s) {
  if (s == "grid") return SearchAlgorithm::grid;
  if (s == "asha") return SearchAlgorithm::asha;
  if (s == "pbt") return SearchAlgorithm::pbt;
  if (s == "random") return SearchAlgorithm::random;
  throw_input("study.json: unknown algorithm '" + s + "'");
}

// JSON has no NaN: null stands for it.
nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }
double number_from(const nlohmann::json& j) { return j.is_null() ? std::nan("") : j.get<double>(); }

void write_json(const std::string& path, const nlohmann::json& j) {
  AtomicOutputFile f(path);
  f.write(j.dump(1) + "\n");
  f.commit();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input(path + ": not found: is this the directory of a crest search study?");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw_input(path + ": damaged: " + e.what());
  }
}

TrialStatus status_from(const std::string& s) {
  for (TrialStatus t : {TrialStatus::running, TrialStatus::paused, TrialStatus::completed,
                        TrialStatus::pruned, TrialStatus::failed})
    if (status_name(t) == s) return t;
  throw_input("state.json: unknown trial status '" + s + "'");
}

}  // namespace

void write_study_options(const StudyOptions& o) {
  namespace fs = std::filesystem;
  write_json(o.out_dir + "/study.json", {{"base_config", fs::absolute(o.base_config).string()},
                                         {"overrides", o.overrides},
                                         {"space", fs::absolute(o.space).string()},
                                         {"ranks_per_trial", o.ranks_per_trial},
                                         {"algorithm", algorithm_name(o.algorithm)},
                                         {"trials", o.trials},
                                         {"seed", o.seed},
                                         {"metric", o.metric},
                                         {"min_epochs", o.min_epochs},
                                         {"max_epochs", o.max_epochs},
                                         {"eta", o.eta}});
}

}  // namespace crest::search_detail

namespace crest {

StudyOptions read_study_options(const std::string& dir) {
  const std::string path = dir + "/study.json";
  const nlohmann::json j = search_detail::read_json(path);
  StudyOptions o;
  try {
    o.base_config = j.at("base_config");
    o.overrides = j.at("overrides").get<std::vector<std::string>>();
    o.space = j.at("space");
    o.ranks_per_trial = j.at("ranks_per_trial");
    o.algorithm = search_detail::algorithm_from(j.at("algorithm"));
    o.trials = j.at("trials");
    o.seed = j.at("seed");
    o.metric = j.at("metric");
    o.min_epochs = j.at("min_epochs");
    o.max_epochs = j.at("max_epochs");
    o.eta = j.at("eta");
  } catch (const nlohmann::json::exception& e) {
    throw_input(path + ": damaged: " + e.what());
  }
  o.out_dir = dir;
  o.resume = true;
  return o;
}

}  // namespace crest

namespace crest::search_detail {

nlohmann::json state_to_json(const SchedulerState& s) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : s.trials) {
    nlohmann::json metric = nlohmann::json::array();
    for (double m : t.metric) metric.push_back(number(m));
    trials.push_back({{"id", t.id},
                      {"params", t.params},
                      {"status", status_name(t.status)},
                      {"group", t.group},
                      {"target_epochs", t.target_epochs},
                      {"metric", metric},
                      {"message", t.message},
                      {"copy_from", t.copy_from},
                      {"copy_epoch", t.copy_epoch}});
  }
  nlohmann::json results = nlohmann::json::array();
  for (const auto& rung : s.results) {
    nlohmann::json r = nlohmann::json::array();
    for (const auto& [m, t] : rung) r.push_back({number(m), t});
    results.push_back(r);
  }
  return {{"trials", trials},
          {"entrants", s.entrants},
          {"taken", s.taken},
          {"to_resume", s.to_resume},
          {"results", results},
          {"promoted", s.promoted},
          {"promotions", s.promotions},
          {"finished", s.finished},
          {"member_of_group", s.member_of_group},
          {"pending_copies", s.pending_copies},
          {"exploits", s.exploits}};
}

SchedulerState state_from_json(const nlohmann::json& j) {
  SchedulerState s;
  for (const auto& t : j.at("trials")) {
    TrialRecord r;
    r.id = t.at("id");
    r.params = t.at("params").get<Assignment>();
    r.status = status_from(t.at("status"));
    r.group = t.at("group");
    r.target_epochs = t.at("target_epochs");
    for (const auto& m : t.at("metric")) r.metric.push_back(number_from(m));
    r.message = t.at("message");
    r.copy_from = t.at("copy_from");
    r.copy_epoch = t.at("copy_epoch");
    s.trials.push_back(std::move(r));
  }
  for (const auto& rung : j.at("results")) {
    s.results.emplace_back();
    for (const auto& e : rung) s.results.back().emplace_back(number_from(e.at(0)), e.at(1));
  }
  s.entrants = j.at("entrants").get<std::vector<std::vector<int>>>();
  s.taken = j.at("taken").get<std::vector<int>>();
  s.to_resume = j.at("to_resume").get<std::vector<std::pair<int, int>>>();
  s.promoted = j.at("promoted").get<std::vector<std::vector<bool>>>();
  s.promotions = j.at("promotions").get<std::vector<std::pair<int, int>>>();
  s.finished = j.at("finished");
  s.member_of_group = j.at("member_of_group").get<std::vector<int>>();
  s.pending_copies = j.at("pending_copies").get<std::vector<int>>();
  s.exploits = j.at("exploits").get<std::vector<std::pair<int, int>>>();
  return s;
}

void write_state(const std::string& dir, const SchedulerState& s) {
  write_json(dir + "/state.json", state_to_json(s));
}

SchedulerState read_state(const std::string& dir) {
  const std::string path = dir + "/state.json";
  try {
    return state_from_json(read_json(path));
  } catch (const nlohmann::json::exception& e) {
    throw_input(path + ": damaged: " + e.what());
  }
}

}  // namespace crest::search_detail
