// crest's side of the HDF5 reader process (crest/data/formats/hdf5_reader.hpp): the readers of
// hdf5.hpp as requests to a reader started with posix_spawn, restarted after it dies.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/hdf5_in_process.hpp"
#include "crest/data/formats/hdf5_reader.hpp"
#include "formats/hdf5_reader_protocol.hpp"
#include "formats/hdf5_sample_bytes.hpp"

namespace crest {
namespace {

using hdf5_reader::MessageReader;
using hdf5_reader::MessageWriter;
using hdf5_reader::Op;
using hdf5_reader::Status;

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Signals by which a process ends on its own fault (a bad access, an abort): libhdf5 crashed.
bool is_crash(int sig) {
  for (const int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP})
    if (sig == s) return true;
  return false;
}

std::string reader_executable() {
  const char* env = std::getenv("CREST_HDF5_READER");
  return env && *env ? env : "/proc/self/exe";
}

// The reader process, its socket, and the shared memory samples are read into. One per crest
// process; every request holds its lock from sending to the last copy out of shared memory.
class Reader {
 public:
  std::mutex& mutex() { return mutex_; }

  // Sends `request` (with the shared memory when `with_sample`) and returns the reply's fields
  // after its status. Throws the reader's error as it threw it, or the reader's end.
  MessageReader call(const std::string& path, const std::string& request, bool with_sample) {
    std::string reply;
    // A reader that ends other than by crashing was ended from outside (the OOM killer, an
    // administrator), perhaps while it sat idle: one fresh reader tries the request again.
    for (int attempt = 0;; ++attempt) {
      start();
      if (hdf5_reader::send_message(socket_, request, with_sample ? shm_fd_ : -1) && receive(reply))
        break;
      ended_while_reading(path, attempt > 0);
    }
    MessageReader in(std::move(reply));
    ErrorKind kind = ErrorKind::runtime;
    std::string message;
    try {
      if (static_cast<Status>(in.u8()) == Status::ok) return in;
      kind = static_cast<ErrorKind>(in.u8());
      message = in.str();
    } catch (const std::runtime_error& e) {
      malformed(path, e);
    }
    throw Error(kind == ErrorKind::usage || kind == ErrorKind::input ? kind : ErrorKind::runtime,
                message);
  }

  // A reply that does not parse: the reader is broken (a file may have corrupted its memory
  // without crashing it). It is ended, and the next request starts a fresh one.
  [[noreturn]] void malformed(const std::string& path, const std::exception& e) {
    (void)stop();
    throw_runtime(path + ": the HDF5 reader process sent a malformed reply (" + e.what() + ")");
  }

  // The shared memory, at least `bytes` long, mapped here.
  char* shared(size_t bytes) {
    if (bytes <= shm_size_) return shm_;
    release_shared();
    shm_fd_ = ::memfd_create("crest-hdf5-sample", MFD_CLOEXEC);
    if (shm_fd_ < 0 || ::ftruncate(shm_fd_, static_cast<off_t>(bytes)) != 0) {
      const int err = errno;
      release_shared();
      throw_runtime("cannot create " + std::to_string(bytes) +
                    " bytes of shared memory for the HDF5 reader: " + errno_text(err));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd_, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      release_shared();
      throw_runtime("cannot map the HDF5 reader's shared memory: " + errno_text(err));
    }
    shm_ = static_cast<char*>(p);
    shm_size_ = bytes;
    return shm_;
  }

  int pid() const { return pid_; }

  // Closes the socket (the reader ends at end of stream) and reaps it; returns its wait status.
  int stop() {
    if (pid_ < 0) return 0;
    ::close(std::exchange(socket_, -1));
    return reap(std::exchange(pid_, -1));
  }

 private:
  void start() {
    if (pid_ >= 0) return;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw_runtime("cannot create a socket for the HDF5 reader: " + errno_text(errno));
    const std::string exe = reader_executable();
    pid_ = spawn(exe, sv[1]);
    ::close(sv[1]);
    socket_ = sv[0];
    if (pid_ < 0) {
      ::close(std::exchange(socket_, -1));
      throw_runtime("cannot start the HDF5 reader (" + exe + " " + kHdf5ReaderCommand +
                    "): " + errno_text(-pid_));
    }
    std::string hello;
    if (!hello_arrives() || !receive(hello) || hello != hdf5_reader::kHello) {
      if (pid_ >= 0) ::kill(pid_, SIGKILL);  // not a reader, or a stuck one
      const int status = stop();
      throw_runtime("the HDF5 reader (" + exe + " " + kHdf5ReaderCommand + ") did not start (" +
                    status_text(status) + ")");
    }
  }

  // posix_spawn, not fork: crest has OpenMP, loader and MPI threads. The reader gets its socket
  // as descriptor 3, no stdin, stderr as its stdout (crest's stdout stays crest's output), the
  // default signal dispositions and mask, and a process group of its own (a Ctrl-C in the
  // terminal is crest's to handle). Returns the pid, or -errno.
  static int spawn(const std::string& exe, int socket) {
    posix_spawn_file_actions_t files;
    posix_spawnattr_t attr;
    ::posix_spawn_file_actions_init(&files);
    ::posix_spawnattr_init(&attr);
    // dup2 onto itself would keep close-on-exec: move it elsewhere first.
    const int from = socket == kHdf5ReaderSocket ? ::fcntl(socket, F_DUPFD_CLOEXEC, 10) : socket;
    ::posix_spawn_file_actions_adddup2(&files, from, kHdf5ReaderSocket);
    ::posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&files, 2, 1);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setsigdefault(&attr, &all);
    ::posix_spawnattr_setpgroup(&attr, 0);
    ::posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    std::string arg0 = exe, arg1 = kHdf5ReaderCommand;
    char* argv[] = {arg0.data(), arg1.data(), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, exe.c_str(), &files, &attr, argv, environ);
    ::posix_spawn_file_actions_destroy(&files);
    ::posix_spawnattr_destroy(&attr);
    if (from != socket) ::close(from);
    return rc == 0 ? pid : -rc;
  }

  // A reader says hello as soon as it runs; an executable that is not one (CREST_HDF5_READER
  // pointing elsewhere) may never write nor exit: waiting is bounded.
  bool hello_arrives() const {
    pollfd p{socket_, POLLIN, 0};
    int rc = 0;
    while ((rc = ::poll(&p, 1, 60000)) < 0 && errno == EINTR) {
    }
    return rc > 0;
  }

  bool receive(std::string& reply) {
    try {
      return hdf5_reader::receive_message(socket_, reply);
    } catch (const std::runtime_error&) {
      return false;  // an oversized message: the reader is broken; it is ended below
    }
  }

  // The reader is gone (or broken) in the middle of a request for `path`: reap it, and throw
  // when it crashed (the file's doing) or when `last` (the retry ended too).
  void ended_while_reading(const std::string& path, bool last) {
    const int status = stop();
    if (WIFSIGNALED(status) && is_crash(WTERMSIG(status)))
      throw_input(path + ": libhdf5 crashed reading it (" + signal_name(WTERMSIG(status)) +
                  "): the file is damaged or hostile");
    if (last)
      throw_runtime(path + ": the HDF5 reader process ended (" + status_text(status) +
                    ") while reading it, twice");
  }

  // A reader at end of stream is exiting: wait for it, but not forever (one that closed its
  // socket and lives on is killed after 10 s).
  static int reap(pid_t pid) {
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) return status;
      if (r < 0 && errno != EINTR) return 0;  // not our child any more (reaped elsewhere)
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  static std::string status_text(int status) {
    if (WIFSIGNALED(status)) return signal_name(WTERMSIG(status));
    if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
    return "status " + std::to_string(status);
  }

  void release_shared() {
    if (shm_) ::munmap(shm_, shm_size_);
    if (shm_fd_ >= 0) ::close(shm_fd_);
    shm_ = nullptr;
    shm_size_ = 0;
    shm_fd_ = -1;
  }

  std::mutex mutex_;
  pid_t pid_ = -1;
  int socket_ = -1;
  int shm_fd_ = -1;
  char* shm_ = nullptr;
  size_t shm_size_ = 0;
};

// Never destroyed: at exit the system closes the socket, and the reader ends at end of stream.
Reader& reader() {
  static Reader* r = new Reader;
  return *r;
}

// A shape from the reader is one its in-process checks accepted, so the file stores its bytes (at
// most 1100:1 compressed). Checked again here, so that a reader whose memory a file corrupted
// cannot make crest allocate more than that.
void check_plausible(const std::string& path, const DeepcamSampleShape& s) {
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  const SampleBytes bytes = sample_bytes(path, s);
  if (bytes.total == 0 || ec || bytes.total / 1100 > file_bytes)
    throw_runtime(path + ": the HDF5 reader process reported an impossible sample shape " +
                  s.str());
}

std::string request(Op op, const std::string& path) {
  return MessageWriter().u8(static_cast<uint8_t>(op)).str(path).bytes();
}

}  // namespace

bool hdf5_reads_isolated() {
  static const bool isolated = [] {
    const char* env = std::getenv("CREST_HDF5_IN_PROCESS");
    return !(env && std::string(env) == "1");
  }();
  return isolated;
}

int hdf5_reader_pid() {
  const std::lock_guard<std::mutex> lock(reader().mutex());
  return reader().pid();
}

void stop_hdf5_reader() {
  const std::lock_guard<std::mutex> lock(reader().mutex());
  (void)reader().stop();
}

DeepcamSampleShape probe_deepcam_sample(const std::string& path) {
  if (!hdf5_reads_isolated()) return hdf5_in_process::probe_deepcam_sample(path);
  const std::lock_guard<std::mutex> lock(reader().mutex());
  MessageReader in = reader().call(path, request(Op::probe, path), false);
  DeepcamSampleShape s;
  try {
    s.height = in.i64();
    s.width = in.i64();
    s.channels = in.i64();
  } catch (const std::runtime_error& e) {
    reader().malformed(path, e);
  }
  check_plausible(path, s);
  return s;
}

int64_t deepcam_data_offset(const std::string& path) {
  if (!hdf5_reads_isolated()) return hdf5_in_process::deepcam_data_offset(path);
  const std::lock_guard<std::mutex> lock(reader().mutex());
  MessageReader in = reader().call(path, request(Op::data_offset, path), false);
  try {
    return in.i64();
  } catch (const std::runtime_error& e) {
    reader().malformed(path, e);
  }
}

void read_deepcam_sample(const std::string& path, const DeepcamSampleShape& expected,
                         float* data_hwc, int32_t* labels_hw) {
  if (!hdf5_reads_isolated())
    return hdf5_in_process::read_deepcam_sample(path, expected, data_hwc, labels_hw);
  const SampleBytes bytes = sample_bytes(path, expected);
  const std::lock_guard<std::mutex> lock(reader().mutex());
  char* shared = bytes.total > 0 ? reader().shared(bytes.total) : nullptr;
  const std::string req = MessageWriter(request(Op::read_sample, path))
                              .i64(expected.height)
                              .i64(expected.width)
                              .i64(expected.channels)
                              .u8(data_hwc != nullptr)
                              .u8(labels_hw != nullptr)
                              .bytes();
  (void)reader().call(path, req, shared != nullptr);
  if (data_hwc) std::memcpy(data_hwc, shared, bytes.data);
  if (labels_hw) std::memcpy(labels_hw, shared + bytes.data, bytes.labels);
}

void read_deepcam_data_block(const std::string& path, const DeepcamSampleShape& expected,
                             const DeepcamWindow& window, float* data_block_hwc) {
  if (!hdf5_reads_isolated())
    return hdf5_in_process::read_deepcam_data_block(path, expected, window, data_block_hwc);
  const size_t bytes = block_bytes(path, expected, window);
  const std::lock_guard<std::mutex> lock(reader().mutex());
  char* shared = reader().shared(bytes);
  const std::string req = MessageWriter(request(Op::read_data_block, path))
                              .i64(expected.height)
                              .i64(expected.width)
                              .i64(expected.channels)
                              .i64(window.h0)
                              .i64(window.h1)
                              .i64(window.w0)
                              .i64(window.w1)
                              .bytes();
  (void)reader().call(path, req, true);
  std::memcpy(data_block_hwc, shared, bytes);
}

DeepcamStats read_deepcam_stats(const std::string& path) {
  if (!hdf5_reads_isolated()) return hdf5_in_process::read_deepcam_stats(path);
  const std::lock_guard<std::mutex> lock(reader().mutex());
  MessageReader in = reader().call(path, request(Op::read_stats, path), false);
  DeepcamStats s;
  try {
    s.count = in.i64();
    s.minval = in.floats();
    s.maxval = in.floats();
    s.mean = in.floats();
    s.sqmean = in.floats();
  } catch (const std::runtime_error& e) {
    reader().malformed(path, e);
  }
  return s;
}

std::string describe_hdf5(const std::string& path) {
  if (!hdf5_reads_isolated()) return hdf5_in_process::describe_hdf5(path);
  const std::lock_guard<std::mutex> lock(reader().mutex());
  MessageReader in = reader().call(path, request(Op::describe, path), false);
  try {
    return in.str();
  } catch (const std::runtime_error& e) {
    reader().malformed(path, e);
  }
}

}  // namespace crest
