// Running the `crest` binary from tests, and scratch directories that clean up after themselves.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace crest::test {

namespace fs = std::filesystem;

struct CliRun {
  int code;
  std::string out;  // stdout and stderr together
};

// A shell command line; its exit code and everything it printed (add 2>&1 for stderr).
inline CliRun run_shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  const int status = p ? pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline CliRun run_crest(const std::string& args) {
  return run_shell(std::string(CREST_BINARY) + " " + args + " 2>&1");
}

// `mpirun ARGS` (e.g. "-np 2 <crest> train ..."), oversubscribed (more ranks than cores is fine
// for tests). `limit_s` bounds the whole job: a hang fails the test instead of the CI run.
inline CliRun run_mpirun(const std::string& args, int limit_s = 120) {
  // Root in CI containers: Open MPI refuses to run as root unless told it is on purpose.
  return run_shell(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 timeout " +
      std::to_string(limit_s) + " " + CREST_MPIEXEC + " --bind-to none " + args + " 2>&1");
}

// `crest ARGS` as `ranks` MPI processes.
inline CliRun run_crest_mpi(int ranks, const std::string& args, int limit_s = 120) {
  return run_mpirun("-np " + std::to_string(ranks) + " " + CREST_BINARY + " " + args, limit_s);
}

// The JSON lines of a command's output (benchmarks print one object per line).
inline std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] == '{') lines.push_back(nlohmann::json::parse(l));
  return lines;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("crest_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  size_t entries() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
  }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

// " output_dir=D/NAME --save-weights D/NAME.safetensors": where a training run writes.
inline std::string run_outputs(const TempDir& d, const std::string& name) {
  return " output_dir=" + d.file(name) + " --save-weights " + d.file(name + ".safetensors");
}

// A copy of run directory `run` as if it had stopped at checkpoint `kept[from]` (`kept`: its
// checkpoints, oldest first): the newer ones are left out of the copy, so `--resume` takes that
// one. Returns the copy's path, D/NAME.
inline std::string run_stopped_at(const TempDir& d, const std::string& run,
                                  const std::vector<std::string>& kept, size_t from,
                                  const std::string& name) {
  std::string copy = d.file(name);
  fs::copy(run, copy, fs::copy_options::recursive);
  for (size_t newer = from + 1; newer < kept.size(); ++newer)
    fs::remove(copy + "/checkpoints/" + fs::path(kept[newer]).filename().string());
  return copy;
}

// The value of `key` on every epoch line of a `crest train` run's output ("epoch 2/4  loss
// 0.0031  val_loss 0.0026  val_iou 0.61 ..."): "loss" is the training loss, "val_top1" a metric.
inline std::vector<double> per_epoch(const std::string& out, const std::string& key) {
  std::vector<double> v;
  std::istringstream in(out);
  const std::regex re("^epoch [0-9]+/[0-9]+.*  " + key + " ([0-9.eE+-]+)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, re)) v.push_back(std::stod(m[1]));
  return v;
}

}  // namespace crest::test
