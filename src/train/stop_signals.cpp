#include "crest/train/stop_signals.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace crest {
namespace {

constexpr std::pair<const char*, int> kSignals[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT},   {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}};

std::atomic<int> first_signal{0};
std::atomic<unsigned> armed{0};  // bit s: a StopSignals asks for signal s

unsigned bit(int signal) { return 1u << static_cast<unsigned>(signal); }

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (const auto& [name, s] : kSignals) sigaddset(&set, s);
  return set;
}

void say(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;  // nothing to do if stderr is gone
}

// A signal nobody armed: take it as if it had never been blocked. Raised on this thread with the
// signal unblocked here only, so the current disposition acts: the default ends the process
// (with the signal's own status), SIG_IGN drops it, a handler runs on this thread.
void pass_on(int signal) {
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(signal);
  pthread_sigmask(SIG_BLOCK, &one, nullptr);
}

void on_stop_signal(int signal) {
  int none = 0;
  if (first_signal.compare_exchange_strong(none, signal)) {
    say("crest: stop signal received: finishing this step, writing a checkpoint, then exiting "
        "(a second signal exits at once)\n");
    return;
  }
  say("crest: second stop signal: exiting now (the newest complete checkpoint is intact)\n");
  ::_exit(128 + signal);
}

[[noreturn]] void router_loop(sigset_t set) {
  pthread_setname_np(pthread_self(), "crest-signals");
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    if ((armed.load() & bit(signal)) != 0) {
      on_stop_signal(signal);
    } else {
      pass_on(signal);
    }
  }
}

std::once_flag router_started;

// The handlers StopSignals installs for a signal that lands on a thread not blocking it (a
// foreign thread of an embedding program): per signal, how many StopSignals arm it and the
// program's own action, restored when the last one disarms.
std::mutex handlers_mutex;
int handler_users[NSIG] = {};
struct sigaction saved_action[NSIG];

void on_foreign_thread(int signal) { on_stop_signal(signal); }  // async-signal-safe, as it is

void install_handler(int signal) {
  const std::lock_guard lock(handlers_mutex);
  if (handler_users[signal]++ > 0) return;
  struct sigaction action {};
  action.sa_handler = on_foreign_thread;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, &saved_action[signal]);
}

void restore_handler(int signal) {
  const std::lock_guard lock(handlers_mutex);
  if (--handler_users[signal] > 0) return;
  sigaction(signal, &saved_action[signal], nullptr);
}

}  // namespace

StopSignalsBlocked::StopSignalsBlocked() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
}

StopSignalsBlocked::~StopSignalsBlocked() {
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

void route_stop_signals() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::call_once(router_started, [&set] {
    // Detached: it waits in sigwait for the whole process and holds nothing to clean up.
    std::thread(router_loop, set).detach();
  });
}

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
  pthread_sigmask(SIG_SETMASK, nullptr, &previous_mask_);
  route_stop_signals();
  for (const std::string& name : names)
    if (const int s = signal_number(name); s != 0 && (armed_bits_ & bit(s)) == 0) {
      armed_bits_ |= bit(s);
      install_handler(s);
    }
  armed.fetch_or(armed_bits_);
}

StopSignals::~StopSignals() {
  armed.fetch_and(~armed_bits_);
  for (const auto& [name, s] : kSignals)
    if ((armed_bits_ & bit(s)) != 0) restore_handler(s);
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

int StopSignals::received() { return first_signal.load(); }

}  // namespace crest
