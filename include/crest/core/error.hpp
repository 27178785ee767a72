// crest::Error: the one exception type. Its kind decides the CLI exit code:
// usage and input errors exit 2 (the user can fix the command or the file), runtime errors exit 1.
#pragma once
#include <stdexcept>
#include <string>

namespace crest {

enum class ErrorKind { usage, input, runtime };

class Error : public std::runtime_error {
 public:
  // Where else in a multi-rank job the same error is raised (the command line prints and ends the
  // job according to it): `this_rank` only (the job must be aborted: the other ranks may be
  // waiting in a collective), or every rank at the same point with the same message, where one
  // rank prints it (`every_rank_printed_here`) and the others stay quiet.
  enum class Scope { this_rank, every_rank_printed_here, every_rank_printed_elsewhere };

  Error(ErrorKind kind, const std::string& message, Scope scope = Scope::this_rank)
      : std::runtime_error(message), kind_(kind), scope_(scope) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return kind_ == ErrorKind::runtime ? 1 : 2; }
  Scope scope() const { return scope_; }

 private:
  ErrorKind kind_;
  Scope scope_;
};

// Shorthands so call sites read as what went wrong.
[[noreturn]] inline void throw_usage(const std::string& m) { throw Error(ErrorKind::usage, m); }
[[noreturn]] inline void throw_input(const std::string& m) { throw Error(ErrorKind::input, m); }
[[noreturn]] inline void throw_runtime(const std::string& m) { throw Error(ErrorKind::runtime, m); }

// The system's text for an errno value, with a hint where the cause is the user's to fix:
// "No space left on device (the disk is full)". Thread-safe (strerror is not).
std::string errno_text(int err);

// An input error for a failed system call on `path`: "<path>: <what>: <errno_text(err)>", e.g.
// throw_io(path, "cannot open", errno). Pass errno directly, or a copy saved before any other call
// (close, unlink) that may change it.
[[noreturn]] void throw_io(const std::string& path, const std::string& what, int err);

// Internal invariant check: a failure is a bug in crest, not in the user's input.
#define CREST_CHECK(cond, msg)                                                              \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::crest::throw_runtime(std::string("internal error: ") + (msg) + " [" #cond "] at " + \
                             __FILE__ + ":" + std::to_string(__LINE__));                    \
  } while (0)

}  // namespace crest
