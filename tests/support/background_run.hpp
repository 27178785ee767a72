// A command run in the background from a test, so the test can act on it while it runs (send a
// signal, kill it) once it has reached a point the test waits for: a line in its output or a
// file. Never a sleep raced against start-up: every wait is for an event, with a generous
// deadline that only a hang exceeds.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace crest::test {

class BackgroundRun {
 public:
  // Runs `command` with /bin/sh (its `exec` makes the command the child itself, so signals go
  // to it), stdout and stderr into `output_file`.
  BackgroundRun(const std::string& command, std::string output_file)
      : output_(std::move(output_file)) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string line = "exec " + command + " > '" + output_ + "' 2>&1";
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~BackgroundRun() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  BackgroundRun(const BackgroundRun&) = delete;
  BackgroundRun& operator=(const BackgroundRun&) = delete;

  pid_t pid() const { return pid_; }
  std::string output() const {
    std::ifstream f(output_);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // Whether `text` appeared in the output before `limit` (false: it ended or the time ran out).
  bool wait_for_output(const std::string& text,
                       std::chrono::seconds limit = std::chrono::seconds(120)) {
    return wait_until([&] { return output().find(text) != std::string::npos; }, limit);
  }
  // Whether `path` exists before `limit`.
  bool wait_for_file(const std::string& path,
                     std::chrono::seconds limit = std::chrono::seconds(120)) {
    return wait_until([&] { return std::filesystem::exists(path); }, limit);
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  // The exit code, or 128 + the signal that ended it (as a shell reports it); -1 after `limit`.
  int wait(std::chrono::seconds limit = std::chrono::seconds(300)) {
    int status = 0;
    const bool done = wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, limit,
                                 /*while_running=*/false);
    if (!done) return -1;
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  bool running() {
    if (reaped_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
    reaped_ = true;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  int exit_status() const { return exit_status_; }

 private:
  template <typename Ready>
  bool wait_until(Ready ready, std::chrono::seconds limit, bool while_running = true) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (ready()) return true;
      if (while_running && !running()) return ready();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  std::string output_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_status_ = -1;
};

}  // namespace crest::test
