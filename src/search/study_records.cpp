// trials.jsonl and trials.csv (study_records.hpp).
#include "study_records.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"

namespace crest::search_detail {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The shortest text that reads back as the same double (what the JSON lines hold too).
std::string number_text(double v) {
  if (std::isnan(v)) return "";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// The figure columns in order of first appearance (train_loss, val_loss, then the metrics).
std::vector<std::string> figure_names(const std::vector<TrialRow>& rows) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& r : rows)
    for (const auto& [name, v] : r.figures)
      if (seen.insert(name).second) names.push_back(name);
  return names;
}

// A kill while a line was written leaves it without its newline: cut it off, so the lines
// appended after a resume are whole JSON lines.
void drop_cut_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::ostringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const size_t keep = s.empty() || s.back() == '\n' ? s.size() : s.rfind('\n') + 1;
  if (keep != s.size())
    std::filesystem::resize_file(path, keep == std::string::npos + 1 ? 0 : keep);
}

// Each trial's table row from its rows in order: the newest row's fields, the seconds of its
// epochs summed (epoch rows are the `running` ones with figures; a status row repeats the last
// epoch's, a PBT copy row has none), and its newest message.
std::map<int, TrialRow> trial_table(const std::vector<TrialRow>& rows) {
  std::map<int, TrialRow> table;
  for (const auto& r : rows) {
    TrialRow& t = table[r.trial];
    const double seconds = t.seconds;
    const std::string message = t.message;
    t = r;
    const bool epoch_row = r.status == "running" && !r.figures.empty();
    t.seconds = seconds + (epoch_row ? r.seconds : 0);
    if (r.message.empty()) t.message = message;
  }
  return table;
}

}  // namespace

bool looks_numeric(const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(v);
}

bool looks_integer(const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  (void)std::strtoll(text.c_str(), &end, 10);
  return errno == 0 && end == text.c_str() + text.size();
}

StudyRecords::StudyRecords(std::string dir, std::vector<std::string> parameter_keys, bool append)
    : dir_(std::move(dir)), keys_(std::move(parameter_keys)) {
  const std::string path = dir_ + "/trials.jsonl";
  if (append) drop_cut_line(path);
  jsonl_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!jsonl_) throw_input(path + ": cannot open for writing");
}

void StudyRecords::load_existing(const std::function<Assignment(int)>& params_of) {
  std::ifstream in(dir_ + "/trials.jsonl");
  const std::set<std::string> fixed{"trial", "group", "status", "epoch", "seconds", "message"};
  const std::set<std::string> keys(keys_.begin(), keys_.end());
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::ordered_json::parse(line);
    TrialRow r;
    r.trial = j.at("trial");
    r.group = j.at("group");
    r.status = j.at("status");
    r.epoch = j.at("epoch");
    r.params = params_of(r.trial);
    for (const auto& [name, v] : j.items())
      if (!fixed.count(name) && !keys.count(name))
        r.figures.emplace_back(name, v.is_null() ? std::nan("") : v.get<double>());
    r.seconds = j.at("seconds");
    r.message = j.at("message");
    rows_.push_back(std::move(r));
  }
}

void StudyRecords::add(const TrialRow& row) {
  nlohmann::ordered_json j;
  j["trial"] = row.trial;
  j["group"] = row.group;
  j["status"] = row.status;
  j["epoch"] = row.epoch;
  for (const auto& key : keys_) {
    const std::string v = value_of(row.params, key);
    if (v.empty())
      j[key] = nullptr;
    else if (looks_integer(v))
      j[key] = std::strtoll(v.c_str(), nullptr, 10);
    else if (looks_numeric(v))
      j[key] = std::strtod(v.c_str(), nullptr);
    else
      j[key] = v;
  }
  for (const auto& [name, v] : row.figures)
    j[name] = std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
  j["seconds"] = row.seconds;
  j["message"] = row.message;
  jsonl_ << j.dump() << "\n";
  jsonl_.flush();
  if (!jsonl_) throw_input(dir_ + "/trials.jsonl: write failed (disk full?)");
  rows_.push_back(row);
}

void StudyRecords::write_csv(const std::function<std::string(int)>& status_of) const {
  const std::vector<std::string> figures = figure_names(rows_);
  std::ostringstream out;
  out << "trial,group,status,epoch";
  for (const auto& k : keys_) out << "," << csv_field(k);
  for (const auto& f : figures) out << "," << f;
  out << ",seconds,message\n";
  for (const auto& [trial, r] : trial_table(rows_)) {
    out << r.trial << "," << r.group << "," << status_of(trial) << "," << r.epoch;
    for (const auto& k : keys_) out << "," << csv_field(value_of(r.params, k));
    for (const auto& f : figures) {
      double v = std::nan("");
      for (const auto& [name, x] : r.figures)
        if (name == f) v = x;
      out << "," << number_text(v);
    }
    out << "," << number_text(r.seconds) << "," << csv_field(r.message) << "\n";
  }
  AtomicOutputFile file(dir_ + "/trials.csv");
  file.write(out.str());
  file.commit();
}

}  // namespace crest::search_detail
