// crest::Error: the one exception type. Its kind decides the CLI exit code:
// usage and input errors exit 2 (the user can fix the command or the file), runtime errors exit 1.
#pragma once
#include <stdexcept>
#include <string>

namespace crest {

enum class ErrorKind { usage, input, runtime };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return kind_ == ErrorKind::runtime ? 1 : 2; }

 private:
  ErrorKind kind_;
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
