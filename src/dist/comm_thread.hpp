// CommThread: the one thread that makes MPI calls after MPI_Init (src/dist, internal).
//
// Why one thread: collectives must be issued in the same order on every rank, and gradient
// buckets are handed over from inside backward() while the compute threads go on. Funnelling
// every call through one FIFO worker keeps the order a program property (submission order), lets
// a bucket's allreduce run while backward computes the next layers, and needs only
// MPI_THREAD_SERIALIZED from the MPI library.
//
// Why a watchdog here: every wait on a submitted collective has a deadline (dist.timeout_s). A
// rank that died or never arrives turns into a message naming the collective, then the job is
// aborted — never a silent hang.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "crest/dist/communicator.hpp"

namespace crest::dist_detail {

using crest::steady_seconds;

// One submitted piece of communication work.
struct CommTask {
  std::function<void()> run;
  std::string what;  // for watchdog messages: "allreduce of gradient bucket 2/5 (24.9 MB)"
  uint64_t sequence = 0;
  // Guarded by the owning CommThread's mutex.
  bool started = false, done = false;
  std::exception_ptr error;
  double queued_at = 0, started_at = 0, done_at = 0;  // steady_clock seconds
};

class CommThread {
 public:
  // `on_timeout(task, waited_s)` is called (from the waiting thread) when a wait passes
  // `timeout_s`; it must not return (it aborts the job).
  using TimeoutHandler = std::function<void(const CommTask&, double)>;
  CommThread(double timeout_s, TimeoutHandler on_timeout);
  // Runs what is queued, then stops. A worker still inside a collective after timeout_s (this
  // rank is unwinding from an error while the others never join) goes to on_timeout too.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `fn`; it runs on the worker after everything submitted before it.
  std::shared_ptr<CommTask> submit(std::function<void()> fn, std::string what);
  // Blocks until `task` ran; rethrows its exception. Past the deadline (timeout_s, plus
  // `grace_s` for a task that enforces its own deadline and should be the one to report it):
  // on_timeout.
  void wait(const std::shared_ptr<CommTask>& task, double grace_s = 0);
  // submit + wait.
  void run(std::function<void()> fn, std::string what);

  double timeout_s() const { return timeout_s_; }

  // What the worker is doing, for other ranks asking after a timeout.
  struct Activity {
    uint64_t running = 0;  // sequence number of the task in progress, 0 when idle
    std::string running_what;
    uint64_t completed = 0;  // tasks completed so far
  };
  Activity activity();

 private:
  void loop();

  double timeout_s_;
  TimeoutHandler on_timeout_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::shared_ptr<CommTask>> queue_;
  uint64_t next_sequence_ = 1;
  std::shared_ptr<CommTask> running_;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  bool exited_ = false;
  std::thread worker_;
};

}  // namespace crest::dist_detail
