#include "crest/train/run_directory.hpp"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <vector>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/core/whole_lines.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {
namespace fs = std::filesystem;

namespace {

// The lines of one top-level section of a resolved config ("  key: value", indented), so two
// configs can be compared section by section.
std::vector<std::string> section_lines(const std::string& yaml, const std::string& section) {
  std::vector<std::string> out;
  std::istringstream in(yaml);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#')
      inside = line == section + ":";
    else if (inside && !line.empty())
      out.push_back(line);
  }
  return out;
}

// "" when `section` is the same in both, else which line differs.
std::string section_difference(const std::string& saved, const std::string& now,
                               const std::string& section) {
  const auto a = section_lines(saved, section), b = section_lines(now, section);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)", y = i < b.size() ? b[i] : "(nothing)";
    if (x != y) {
      auto trim = [](std::string s) { return s.erase(0, s.find_first_not_of(' ')); };
      return section + ": the checkpoint has '" + trim(x) + "', this run '" + trim(y) + "'";
    }
  }
  return "";
}

// The value of `section.key` in a resolved config's text ("" when absent).
std::string value_of(const std::string& yaml, const std::string& section, const std::string& key) {
  for (const std::string& line : section_lines(yaml, section)) {
    const auto at = line.find_first_not_of(' ');
    if (line.compare(at, key.size() + 1, key + ":") == 0) {
      std::string v = line.substr(at + key.size() + 1);
      return v.erase(0, v.find_first_not_of(' '));
    }
  }
  return "";
}

// The newest checkpoint of `existing` (oldest first) that reads back whole into rd.resume_from
// and rd.resume_info. Damaged newer ones are renamed to <name>.damaged (kept for a post-mortem,
// and out of the way: a later write of the same step, or checkpoint_keep's rotation, must never
// take a damaged file for a newer checkpoint) and named in rd.skipped. Throws when none is valid,
// naming each file's defect and leaving them as they are.
void pick_newest_valid(const std::vector<std::string>& existing, RunDirectory& rd) {
  std::vector<std::string> defects;  // newest first
  for (size_t i = existing.size(); i-- > 0;) {
    try {
      rd.resume_info = read_checkpoint_info(existing[i]);
      rd.resume_from = existing[i];
      break;
    } catch (const Error& e) {
      defects.emplace_back(e.what());
    }
  }
  if (rd.resume_from.empty()) {
    std::string all;
    for (const auto& d : defects) all += "\n  " + d;
    throw_input(rd.checkpoint_dir + ": no valid checkpoint to resume from:" + all);
  }
  for (size_t i = 0; i < defects.size(); ++i) {
    const std::string& bad = existing[existing.size() - 1 - i];
    std::error_code ec;
    fs::rename(bad, bad + ".damaged", ec);
    rd.skipped.push_back(
        "skipped " + defects[i] +
        (ec ? " (could not rename it: " + ec.message() + ")" : "; renamed to " + bad + ".damaged"));
  }
}

}  // namespace

void broadcast_text(Communicator& comm, std::string& text, int root) {
  uint64_t n = text.size();
  comm.broadcast(&n, sizeof n, root);
  text.resize(n);
  if (n > 0) comm.broadcast(text.data(), n, root);
}

void fail_with_rank0(Communicator& comm, const std::string& problem) {
  std::string p = comm.rank() == 0 ? problem : std::string();
  broadcast_text(comm, p);
  // Every rank stops here with the same message: rank 0 says it, once for the job.
  if (!p.empty())
    throw Error(ErrorKind::input, p,
                comm.rank() == 0 ? Error::Scope::every_rank_printed_here
                                 : Error::Scope::every_rank_printed_elsewhere);
}

namespace {

// A data key the epoch's order depends on, as a resolved config has it. train_order is printed
// for DeepCAM only, and configs written before it existed lack it: both mean crest's order.
std::string order_setting(const std::string& resolved_yaml, const char* key) {
  const std::string v = value_of(resolved_yaml, "data", key);
  return v.empty() && std::string(key) == "train_order" ? "crest" : v;
}

}  // namespace

std::string resume_position_problem(const CheckpointInfo& info, const Config& config, int ranks,
                                    int64_t steps_per_epoch) {
  if (info.position.step_in_epoch == 0) return "";
  const std::string where =
      "the checkpoint stopped mid-epoch (epoch " + std::to_string(info.position.epoch + 1) +
      ", step " + std::to_string(info.position.step_in_epoch) + "); to continue that epoch ";
  if (info.ranks != ranks)
    return where + "the job needs the same ranks: it was written by " + std::to_string(info.ranks) +
           ", this job has " + std::to_string(ranks);
  if (info.batch_size != config.data.batch_size)
    return where + "data.batch_size must stay " + std::to_string(info.batch_size) + " (now " +
           std::to_string(config.data.batch_size) + ")";
  if (info.steps_per_epoch != steps_per_epoch)
    return where + "the epoch must keep its " + std::to_string(info.steps_per_epoch) +
           " steps (now " + std::to_string(steps_per_epoch) +
           ": data.n_train or the files changed)";
  for (const char* key : {"seed", "shuffle", "train_order"}) {
    const std::string saved = order_setting(info.config_yaml, key),
                      now = order_setting(config.resolved_yaml, key);
    if (saved != now) return where + "data." + key + " must stay " + saved + " (now " + now + ")";
  }
  return "";
}

RunDirectory prepare_run_directory(const Config& config, bool resume, bool overwrite,
                                   Communicator& comm) {
  RunDirectory rd;
  if (config.output_dir.empty()) {
    if (resume) throw_input("--resume needs an output_dir to continue from");
    return rd;
  }
  rd.checkpoint_dir = config.output_dir + "/checkpoints";
  std::string problem;
  if (comm.rank() == 0) {
    try {
      const auto existing = list_checkpoints(rd.checkpoint_dir);
      if (resume) {
        if (existing.empty())
          throw_input(
              rd.checkpoint_dir +
              ": no checkpoint to resume from (the run wrote none, or it is not a run directory)");
        pick_newest_valid(existing, rd);
        for (const char* section : {"model"})
          if (auto d =
                  section_difference(rd.resume_info->config_yaml, config.resolved_yaml, section);
              !d.empty())
            throw_input(rd.resume_from + ": cannot resume with a changed model: " + d);
        const std::string opt_saved = value_of(rd.resume_info->config_yaml, "optimizer", "name");
        const std::string opt_now = value_of(config.resolved_yaml, "optimizer", "name");
        if (opt_saved != opt_now)
          throw_input(rd.resume_from +
                      ": cannot resume with another optimizer: the checkpoint has " + opt_saved +
                      ", this run " + opt_now);
      } else if (!existing.empty()) {
        if (!overwrite)
          throw_input(
              config.output_dir + " already holds checkpoints of an earlier run (newest " +
              fs::path(existing.back()).filename().string() +
              "): continue it with `crest train --resume " + config.output_dir +
              "`, choose another output_dir=, or start over with --overwrite (deletes them)");
        for (const auto& f : existing) fs::remove(f);
      }
      std::error_code ec;
      fs::create_directories(config.output_dir, ec);
      if (ec) throw_input(config.output_dir + ": cannot create the run directory: " + ec.message());
      // A kill during a checkpoint write leaves its temporary file behind: not a checkpoint, so
      // it is only clutter now.
      if (fs::is_directory(rd.checkpoint_dir, ec))
        for (const auto& e : fs::directory_iterator(rd.checkpoint_dir, ec))
          if (e.path().filename().string().find(".safetensors.tmp-") != std::string::npos)
            fs::remove(e.path(), ec);
      write_file_atomically(config.output_dir + "/config.yaml", config.resolved_yaml);
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  fail_with_rank0(comm, problem);
  return rd;
}

// ---- RunLog: a stream that writes to two places.

namespace {
class TeeBuf : public std::streambuf {
 public:
  TeeBuf(std::streambuf* a, std::streambuf* b) : a_(a), b_(b) {}

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const auto ch = traits_type::to_char_type(c);
    a_->sputc(ch);
    if (b_) b_->sputc(ch);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    a_->sputn(s, n);
    if (b_) b_->sputn(s, n);
    return n;
  }
  int sync() override {
    const int r = a_->pubsync();
    if (b_) b_->pubsync();
    return r;
  }

 private:
  std::streambuf* a_;
  std::streambuf* b_;
};
}  // namespace

struct RunLog::Impl {
  std::ofstream file;
  // Under mpirun the ranks share one pipe: the log reaches it a whole line at a time, so
  // another rank's message cannot land inside one of its lines.
  std::unique_ptr<WholeLines> whole;
  std::unique_ptr<TeeBuf> buf;
  std::unique_ptr<std::ostream> out;
};

RunLog::RunLog(std::ostream& to, const std::string& path, bool append)
    : impl_(std::make_unique<Impl>()) {
  if (!path.empty()) {
    impl_->file.open(path, append ? std::ios::app : std::ios::trunc);
    if (!impl_->file) throw_io(path, "cannot write the run log", errno);
  }
  impl_->whole = std::make_unique<WholeLines>(to);
  impl_->buf =
      std::make_unique<TeeBuf>(impl_->whole->rdbuf(), path.empty() ? nullptr : impl_->file.rdbuf());
  impl_->out = std::make_unique<std::ostream>(impl_->buf.get());
}

RunLog::~RunLog() {
  if (impl_->out) impl_->out->flush();
}

std::ostream& RunLog::stream() { return *impl_->out; }

}  // namespace crest
