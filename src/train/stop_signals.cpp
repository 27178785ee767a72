#include "stop_signals.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace crest {
namespace {

// Lock-free, hence safe to store from a signal handler (a std::mutex or std::string is not).
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void say(const char* text) {
  // write(2) is async-signal-safe; its result cannot be acted on here.
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  if (first_signal.compare_exchange_strong(none, signal)) {
    say("crest: stop signal received: finishing this step, writing a checkpoint, then exiting "
        "(a second signal exits at once)\n");
    return;
  }
  say("crest: second stop signal: exiting now (the newest complete checkpoint is intact)\n");
  ::_exit(128 + signal);
}

constexpr std::pair<const char*, int> kSignals[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT},   {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}};

}  // namespace

int signal_number(const std::string& name) {
  const std::string bare = name.rfind("SIG", 0) == 0 ? name.substr(3) : name;
  for (const auto& [n, s] : kSignals)
    if (bare == n) return s;
  return 0;
}

std::string signal_name(int signal) {
  for (const auto& [n, s] : kSignals)
    if (s == signal) return std::string("SIG") + n;
  return "signal " + std::to_string(signal);
}

StopSignals::StopSignals(const std::vector<std::string>& names) {
  first_signal = 0;  // a new run in this process (tests run several) starts unasked
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in progress go on instead of failing with EINTR
  for (const std::string& name : names) {
    const int s = signal_number(name);
    if (s == 0) continue;
    struct sigaction old {};
    if (::sigaction(s, &sa, &old) == 0) previous_.emplace_back(s, old);
  }
}

StopSignals::~StopSignals() {
  for (auto& [s, old] : previous_) ::sigaction(s, &old, nullptr);
}

int StopSignals::received() { return first_signal.load(); }

}  // namespace crest
