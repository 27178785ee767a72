// MPI communicator. Every MPI call after MPI_Init runs on the communication thread
// (dist/comm_thread.hpp), so the library only has to provide MPI_THREAD_SERIALIZED; crest asks
// for MPI_THREAD_MULTIPLE so that the watchdog may call MPI_Abort while that thread is stuck.
#include "mpi_communicator.hpp"

// The C API only (OMPI_SKIP_MPICXX: mpi.h would otherwise pull in the deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "comm_thread.hpp"
#include "crest/core/bf16.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"

namespace crest::dist_detail {
namespace {

// Largest element count handed to one MPI call (counts are int).
constexpr size_t kMaxCount = size_t{1} << 30;

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw_runtime("MPI " + what + " failed: " + mpi_error_text(rc));
}

// Process-wide MPI state: initialised on first use, finalised at exit unless the job aborted.
class MpiRuntime {
 public:
  static MpiRuntime& get() {
    static MpiRuntime runtime;
    return runtime;
  }
  void init() {
    std::lock_guard lock(mu_);
    if (initialized_) return;
    int already = 0;
    MPI_Initialized(&already);
    if (!already)
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided_), "MPI_Init_thread");
    else
      MPI_Query_thread(&provided_);
    if (provided_ < MPI_THREAD_SERIALIZED)
      throw_runtime(
          "the MPI library gives thread level " + std::to_string(provided_) +
          "; crest needs MPI_THREAD_SERIALIZED or better (its communication thread calls MPI)");
    // Errors come back as return codes, which crest turns into messages; the default handler
    // would abort without saying which collective failed.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
    initialized_ = true;
  }
  bool active() const {
    int fin = 0;
    MPI_Finalized(&fin);
    return initialized_ && !fin;
  }
  bool multiple() const { return provided_ >= MPI_THREAD_MULTIPLE; }
  int world_size() const { return world_size_; }
  ~MpiRuntime() {
    if (active()) MPI_Finalize();
  }

 private:
  std::mutex mu_;
  bool initialized_ = false;
  int provided_ = 0;
  int world_size_ = 1;
};

// Answers other ranks' "what are you doing?" after their watchdog fired, on a communicator of its
// own (a duplicate of the world), from a thread that polls every 20 ms rather than blocking in
// MPI_Recv (which would spin on a core all run long). Needs MPI_THREAD_MULTIPLE: it talks while
// the communication thread is inside a collective.
class StatusResponder {
 public:
  StatusResponder(MPI_Comm of, int rank, int size) : rank_(rank), size_(size) {
    check(MPI_Comm_dup(of, &comm_), "MPI_Comm_dup (status channel)");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~StatusResponder() { stop(); }
  void start(CommThread* source) {
    source_ = source;
    thread_ = std::thread([this] { loop(); });
  }
  void stop() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    thread_.join();
    MPI_Comm_free(&comm_);
  }

  // Asks every other rank what it is doing; waits at most `wait_s`. One line per rank.
  std::string ask_others(double wait_s) {
    std::vector<MPI_Request> reqs;
    std::vector<int> peers;
    std::vector<std::array<char, kReply>> replies(static_cast<size_t>(size_));
    char query = 1;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request rq = MPI_REQUEST_NULL, sq = MPI_REQUEST_NULL;
      if (MPI_Irecv(replies[static_cast<size_t>(r)].data(), kReply, MPI_CHAR, r, kTagReply, comm_,
                    &rq) != MPI_SUCCESS ||
          MPI_Isend(&query, 1, MPI_CHAR, r, kTagQuery, comm_, &sq) != MPI_SUCCESS)
        continue;
      MPI_Request_free(&sq);  // one byte: sent eagerly, nothing to wait for
      reqs.push_back(rq);
      peers.push_back(r);
    }
    std::vector<bool> answered(reqs.size(), false);
    const double deadline = steady_seconds() + wait_s;
    for (size_t left = reqs.size(); left > 0 && steady_seconds() < deadline;) {
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (answered[i]) continue;
        int flag = 0;
        MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
        if (flag) {
          answered[i] = true;
          --left;
        }
      }
      const timespec pause{0, 10'000'000};
      nanosleep(&pause, nullptr);
    }
    std::string out;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const int r = peers[i];
      out += "  rank " + std::to_string(r) + ": ";
      if (answered[i]) {
        auto& text = replies[static_cast<size_t>(r)];
        text[kReply - 1] = '\0';
        out += std::string(text.data()) + "\n";
      } else {
        MPI_Cancel(&reqs[i]);
        out += "no answer within " + std::to_string(static_cast<int>(wait_s)) +
               " s (dead, stopped, or stuck outside crest's communication)\n";
      }
    }
    return out;
  }

 private:
  static constexpr int kReply = 256, kTagQuery = 1, kTagReply = 2;

  void loop() {
    char query = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st;
    for (;;) {
      if (req == MPI_REQUEST_NULL &&
          MPI_Irecv(&query, 1, MPI_CHAR, MPI_ANY_SOURCE, kTagQuery, comm_, &req) != MPI_SUCCESS)
        return;
      int flag = 0;
      MPI_Test(&req, &flag, &st);
      if (flag) {
        const CommThread::Activity a = source_->activity();
        std::array<char, kReply> reply{};
        const std::string text =
            a.running ? "in collective #" + std::to_string(a.running) + ": " + a.running_what
                      : "not in a collective (" + std::to_string(a.completed) + " completed)";
        std::snprintf(reply.data(), reply.size(), "%s", text.c_str());
        MPI_Send(reply.data(), kReply, MPI_CHAR, st.MPI_SOURCE, kTagReply, comm_);
        req = MPI_REQUEST_NULL;
        continue;
      }
      if (stopping_) {
        MPI_Cancel(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
      }
      const timespec pause{0, 20'000'000};  // 20 ms: costs nothing, answers fast enough
      nanosleep(&pause, nullptr);
    }
  }

  int rank_, size_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  CommThread* source_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

[[noreturn]] void watchdog_abort(int rank, int size, const CommTask& task, double waited_s,
                                 double timeout_s, StatusResponder* responder) {
  std::fprintf(stderr,
               "crest: rank %d of %d: %s (collective #%llu) has not completed after %.0f s "
               "(dist.timeout_s = %g)%s. Another rank has died, hangs, or runs a different "
               "sequence of collectives. Asking the other ranks what they are doing...\n",
               rank, size, task.what.c_str(), static_cast<unsigned long long>(task.sequence),
               waited_s, timeout_s,
               task.started ? "" : " — it is still queued behind the collective in progress");
  std::fflush(stderr);
  const std::string others =
      responder ? responder->ask_others(2.0)
                : "  (cannot ask: the MPI library does not provide MPI_THREAD_MULTIPLE)\n";
  std::fprintf(stderr, "crest: rank %d of %d: the other ranks:\n%sAborting the job.\n", rank, size,
               others.c_str());
  std::fflush(stderr);
  if (MpiRuntime::get().multiple()) MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);  // the launcher sees a failed rank and ends the job
}

// MPI has no bfloat16 and (before MPI 4.1) no fp16: user reductions over 16-bit words sum them
// in float, rounded back to nearest even. Created once, on the communication thread, and never
// freed (they live as long as MPI).
template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void sum_16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = narrow(widen(a[i]) + widen(b[i]));
}
MPI_Op sum_16_op(Float16 format) {
  static const MPI_Op bf16 = [] {
    MPI_Op o = MPI_OP_NULL;
    check(MPI_Op_create(&sum_16<bf16_to_float, float_to_bf16>, 1, &o), "MPI_Op_create (bf16 sum)");
    return o;
  }();
  static const MPI_Op fp16 = [] {
    MPI_Op o = MPI_OP_NULL;
    check(MPI_Op_create(&sum_16<fp16_to_float, float_to_fp16>, 1, &o), "MPI_Op_create (fp16 sum)");
    return o;
  }();
  return format == Float16::bf16 ? bf16 : fp16;
}

class MpiPending final : public PendingCollective {
 public:
  // `grace_s`: for a task with a deadline of its own (an exchange), the wait's is that much later,
  // so the task's error, which names what was exchanged, is the one reported.
  MpiPending(std::shared_ptr<CommThread> thread, std::shared_ptr<CommTask> task, double grace_s = 0)
      : thread_(std::move(thread)), task_(std::move(task)), grace_s_(grace_s) {}
  ~MpiPending() override {
    // The buffer must not go away under a running collective: wait, but never throw here.
    if (!waited_) try {
        thread_->wait(task_, grace_s_);
      } catch (...) {
      }
  }
  void wait() override {
    if (task_ && !waited_) {
      waited_ = true;
      thread_->wait(task_, grace_s_);
    }
  }
  Timing timing() const override { return {task_->queued_at, task_->started_at, task_->done_at}; }

 private:
  std::shared_ptr<CommThread> thread_;
  std::shared_ptr<CommTask> task_;
  double grace_s_ = 0;
  bool waited_ = false;
};

// Cancels every request still pending (a peer that never came), waiting for the cancellation.
void cancel_all(std::vector<MPI_Request>& reqs) {
  for (auto& r : reqs)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
}

// Polls point-to-point requests to completion, each MPI_Testall a short task on the
// communication thread, so the thread runs this rank's collectives between polls; past the
// thread's timeout cancels them and throws crest::Error (runtime) naming `what`. The pause
// between polls doubles from `first_pause_ns` up to 0.1 ms.
void poll_to_completion(CommThread& thread, std::vector<MPI_Request>& reqs, const std::string& what,
                        long first_pause_ns) {
  const double deadline = steady_seconds() + thread.timeout_s();
  long pause_ns = first_pause_ns;
  for (int done = 0;;) {
    thread.run(
        [&] {
          check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE),
                "MPI_Testall");
        },
        what);
    if (done) return;
    if (steady_seconds() > deadline) {
      thread.run([&] { cancel_all(reqs); }, what);
      throw_runtime(what + ": not complete after " +
                    std::to_string(static_cast<int>(thread.timeout_s())) +
                    " s (dist.timeout_s); a neighbouring rank has died or hangs");
    }
    const timespec pause{0, pause_ns};
    nanosleep(&pause, nullptr);
    pause_ns = std::min(pause_ns * 2, 100'000L);
  }
}

// A send posted on the communication thread and then polled in short tasks (as send() is), so
// the thread runs this rank's receives and collectives while the receiver is not ready yet.
class MpiPendingSend final : public PendingCollective {
 public:
  MpiPendingSend(std::shared_ptr<CommThread> thread, MPI_Request req, std::string what)
      : thread_(std::move(thread)), reqs_{req}, what_(std::move(what)) {
    timing_.queued = timing_.started = steady_seconds();
  }
  ~MpiPendingSend() override {
    // The buffer must not go away under a message in flight: wait, but never throw here.
    try {
      wait();
    } catch (...) {
    }
  }
  void wait() override {
    if (done_) return;
    done_ = true;
    poll_to_completion(*thread_, reqs_, what_, 2'000);
    timing_.done = steady_seconds();
  }
  Timing timing() const override { return timing_; }

 private:
  std::shared_ptr<CommThread> thread_;
  std::vector<MPI_Request> reqs_;
  std::string what_;
  Timing timing_;
  bool done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned, std::shared_ptr<CommThread> thread,
                  std::shared_ptr<StatusResponder> responder = nullptr)
      : comm_(comm), owned_(owned), thread_(std::move(thread)), responder_(std::move(responder)) {
    thread_->run(
        [&] {
          check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
          check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
          // Local rank and size: the ranks sharing this node's memory. Test hook: with
          // CREST_TEST_RANKS_PER_NODE=k, ranks k*j .. k*j+k-1 count as node j, so node-aware code
          // (distributed staging) can be tested on one machine.
          MPI_Comm node = MPI_COMM_NULL;
          if (const char* k = std::getenv("CREST_TEST_RANKS_PER_NODE"); k && std::atoi(k) > 0)
            check(MPI_Comm_split(comm_, rank_ / std::atoi(k), rank_, &node),
                  "MPI_Comm_split (simulated nodes)");
          else
            check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
                  "MPI_Comm_split_type (node-local ranks)");
          MPI_Comm_rank(node, &local_rank_);
          MPI_Comm_size(node, &local_size_);
          check(MPI_Allreduce(&rank_, &node_id_, 1, MPI_INT, MPI_MIN, node),
                "MPI_Allreduce (the node's lowest rank)");
          MPI_Comm_free(&node);
        },
        "communicator set-up");
  }
  ~MpiCommunicator() override {
    if (responder_) responder_->stop();
    if (owned_) try {
        thread_->run([this] { MPI_Comm_free(&comm_); }, "MPI_Comm_free");
      } catch (...) {
      }
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int node_id() const override { return node_id_; }

  void barrier() override {
    thread_->run([this] { check(MPI_Barrier(comm_), "MPI_Barrier"); }, "barrier");
  }
  void allreduce_sum(double* values, size_t n) override {
    thread_->run([=, this] { sum_in_place(values, n, MPI_DOUBLE, sizeof(double)); },
                 "allreduce of " + std::to_string(n) + " doubles (metrics)");
  }
  void allreduce_sum(int64_t* values, size_t n) override {
    thread_->run([=, this] { sum_in_place(values, n, MPI_INT64_T, sizeof(int64_t)); },
                 "allreduce of " + std::to_string(n) + " integers (counts)");
  }
  std::unique_ptr<PendingCollective> start_allreduce(float* values, size_t n, float scale,
                                                     std::string what) override {
    return start_scaled_sum(values, n, MPI_FLOAT, scale, what);
  }
  std::unique_ptr<PendingCollective> start_allreduce(double* values, size_t n, double scale,
                                                     std::string what) override {
    return start_scaled_sum(values, n, MPI_DOUBLE, scale, what);
  }
  std::unique_ptr<PendingCollective> start_allreduce_16(uint16_t* values, size_t n, Float16 format,
                                                        std::string what) override {
    auto task = thread_->submit(
        [=, this] {
          emulate_slow_link(n * sizeof(uint16_t));
          for (size_t done = 0; done < n;) {
            const size_t k = std::min(n - done, kMaxCount);
            check(MPI_Allreduce(MPI_IN_PLACE, values + done, static_cast<int>(k), MPI_UINT16_T,
                                sum_16_op(format), comm_),
                  format == Float16::bf16 ? "MPI_Allreduce (bf16)" : "MPI_Allreduce (fp16)");
            done += k;
          }
        },
        std::move(what));
    return std::make_unique<MpiPending>(thread_, std::move(task));
  }
  void broadcast(void* data, size_t bytes, int root) override {
    thread_->run(
        [=, this] {
          auto* p = static_cast<char*>(data);
          for (size_t done = 0; done < bytes;) {
            const size_t k = std::min(bytes - done, kMaxCount);
            check(MPI_Bcast(p + done, static_cast<int>(k), MPI_BYTE, root, comm_), "MPI_Bcast");
            done += k;
          }
        },
        "broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root));
  }
  std::vector<std::byte> allgatherv(const std::vector<std::byte>& mine) override {
    std::vector<std::byte> out;
    thread_->run([&] { out = gather_all(mine); },
                 "allgather of " + std::to_string(mine.size()) + " bytes");
    return out;
  }
  // A send is an MPI_Isend, then MPI_Test polls, each a short task on the communication thread:
  // between polls the thread runs other work (this rank's group collectives), so a message that
  // waits for its receiver never holds up training.
  void send(int dest, int tag, const std::vector<std::byte>& bytes) override {
    if (bytes.size() > static_cast<size_t>(INT_MAX))
      throw_runtime("point-to-point message of " + std::to_string(bytes.size()) +
                    " bytes: larger than one MPI message (2 GiB)");
    const std::string what = "send of " + std::to_string(bytes.size()) + " bytes to rank " +
                             std::to_string(dest) + " (tag " + std::to_string(tag) + ")";
    MPI_Request req = MPI_REQUEST_NULL;
    thread_->run(
        [&] {
          check(MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag, comm_,
                          &req),
                "MPI_Isend");
        },
        what);
    long pause_ns = 20'000;
    for (int done = 0;;) {
      thread_->run([&] { check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test"); }, what);
      if (done) return;
      const timespec pause{0, pause_ns};
      nanosleep(&pause, nullptr);
      pause_ns = std::min(pause_ns * 2, 2'000'000L);
    }
  }
  std::optional<Message> try_receive(int source, int tag) override {
    std::optional<Message> got;
    thread_->run(
        [&] {
          int flag = 0;
          MPI_Status st;
          const int from = source == kAnySource ? MPI_ANY_SOURCE : source;
          check(MPI_Iprobe(from, tag, comm_, &flag, &st), "MPI_Iprobe");
          if (!flag) return;
          int count = 0;
          check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
          Message m;
          m.source = st.MPI_SOURCE;
          m.tag = st.MPI_TAG;
          m.bytes.resize(static_cast<size_t>(count));
          // The message probed is the one received: only this thread receives on comm_.
          check(MPI_Recv(m.bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm_,
                         MPI_STATUS_IGNORE),
                "MPI_Recv");
          got = std::move(m);
        },
        "receive (tag " + std::to_string(tag) + ")");
    return got;
  }

  // Posted in one task, then MPI_Testall polls as short tasks (as send() does): the thread runs
  // this rank's other collectives between polls, so a neighbour that is itself inside a gradient
  // allreduce completes it and then answers.
  void exchange(const std::vector<Outgoing>& sends, const std::vector<Incoming>& receives,
                const std::string& what) override {
    if (sends.empty() && receives.empty()) return;
    std::vector<MPI_Request> reqs = requests_for(sends, receives, what);
    thread_->run([&] { post_requests(sends, receives, reqs); }, what);
    poll_to_completion(*thread_, reqs, what, 2'000);  // halos are latency-bound: poll fast first
  }

  // One task posts the messages and polls them to completion, holding the communication thread:
  // the caller computes meanwhile and nobody else would make MPI progress for these requests.
  // Every rank submits its communication in program order, so a neighbour reaches this exchange
  // after the same collectives and none of them waits behind it.
  std::unique_ptr<PendingCollective> start_exchange(const std::vector<Outgoing>& sends,
                                                    const std::vector<Incoming>& receives,
                                                    const std::string& what) override {
    auto reqs = std::make_shared<std::vector<MPI_Request>>(requests_for(sends, receives, what));
    const double timeout_s = thread_->timeout_s();
    auto task = thread_->submit(
        [=, this] {
          post_requests(sends, receives, *reqs);
          const double deadline = steady_seconds() + timeout_s;
          long pause_ns = 1'000;
          for (int done = 0;;) {
            check(MPI_Testall(static_cast<int>(reqs->size()), reqs->data(), &done,
                              MPI_STATUSES_IGNORE),
                  "MPI_Testall");
            if (done) return;
            if (steady_seconds() > deadline) {
              cancel_all(*reqs);
              throw_runtime(what + ": not complete after " +
                            std::to_string(static_cast<int>(timeout_s)) +
                            " s (dist.timeout_s); a neighbouring rank has died or hangs");
            }
            const timespec pause{0, pause_ns};
            nanosleep(&pause, nullptr);
            pause_ns = std::min(pause_ns * 2, 100'000L);  // completion seen within 0.1 ms
          }
        },
        what);
    return std::make_unique<MpiPending>(thread_, std::move(task), /*grace_s=*/10);
  }

  std::unique_ptr<PendingCollective> start_send(const Outgoing& m,
                                                const std::string& what) override {
    if (m.bytes > static_cast<size_t>(INT_MAX))
      throw_runtime(what + ": " + std::to_string(m.bytes) +
                    " bytes, larger than one MPI message (2 GiB)");
    MPI_Request req = MPI_REQUEST_NULL;
    thread_->run(
        [&] {
          check(MPI_Isend(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.dest, m.tag, comm_, &req),
                "MPI_Isend");
        },
        what);
    return std::make_unique<MpiPendingSend>(thread_, req, what);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    thread_->run([&] { check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split"); },
                 "split");
    return std::make_unique<MpiCommunicator>(sub, true, thread_);
  }

 private:
  // The requests of an exchange, checked; post_requests (on the communication thread) posts
  // every receive, then every send.
  static std::vector<MPI_Request> requests_for(const std::vector<Outgoing>& sends,
                                               const std::vector<Incoming>& receives,
                                               const std::string& what) {
    for (const auto& m : sends) check_message_size(m.bytes, what);
    for (const auto& m : receives) check_message_size(m.bytes, what);
    return std::vector<MPI_Request>(sends.size() + receives.size(), MPI_REQUEST_NULL);
  }
  void post_requests(const std::vector<Outgoing>& sends, const std::vector<Incoming>& receives,
                     std::vector<MPI_Request>& reqs) const {
    size_t i = 0;
    for (const auto& m : receives)
      check(MPI_Irecv(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.source, m.tag, comm_,
                      &reqs[i++]),
            "MPI_Irecv");
    for (const auto& m : sends)
      check(
          MPI_Isend(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.dest, m.tag, comm_, &reqs[i++]),
          "MPI_Isend");
  }
  static void check_message_size(size_t bytes, const std::string& what) {
    if (bytes > static_cast<size_t>(INT_MAX))
      throw_runtime(what + ": a message of " + std::to_string(bytes) +
                    " bytes is larger than one MPI message (2 GiB)");
  }
  // Runs on the communication thread: requests still pending are cancelled and completed, so
  // MPI never writes into buffers the caller is about to free.

  std::unique_ptr<PendingCollective> start_arrival(const std::string& what) override {
    auto task = thread_->submit([this] { wait_for_every_rank_asleep(); }, what);
    return std::make_unique<MpiPending>(thread_, std::move(task));
  }

  // A gradient bucket's sum, then scale, queued on the communication thread.
  template <typename T>
  std::unique_ptr<PendingCollective> start_scaled_sum(T* values, size_t n, MPI_Datatype type,
                                                      T scale, const std::string& what) {
    auto task = thread_->submit(
        [=, this] {
          emulate_slow_link(n * sizeof(T));
          sum_in_place(values, n, type, sizeof(T));
          if (scale != T(1))
            for (size_t i = 0; i < n; ++i) values[i] *= scale;
        },
        what);
    return std::make_unique<MpiPending>(thread_, std::move(task));
  }

  // Test switch (docs/distributed.md, "Gradient lag"): with CREST_TEST_ALLREDUCE_BYTES_PER_S=B
  // every asynchronous allreduce first waits bytes / B seconds on the communication thread, as if
  // the link were that slow, before its values change: what hides communication can be measured
  // on one machine, and a result read before its wait ends is caught.
  void emulate_slow_link(size_t bytes) const {
    static const double rate = [] {
      const char* v = std::getenv("CREST_TEST_ALLREDUCE_BYTES_PER_S");
      return v ? std::atof(v) : 0.0;
    }();
    if (rate > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(static_cast<double>(bytes) / rate));
  }

  // Runs on the communication thread: an MPI_Ibarrier polled with pauses (20 us doubling to
  // 200 us), so the wait for the last rank holds no core; a blocking collective would spin.
  void wait_for_every_rank_asleep() {
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    long pause_ns = 20'000;
    for (int done = 0;;) {
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      const timespec pause{0, pause_ns};
      nanosleep(&pause, nullptr);
      pause_ns = std::min(pause_ns * 2, 200'000L);
    }
  }

  // Runs on the communication thread.
  void sum_in_place(void* values, size_t n, MPI_Datatype type, size_t elem) {
    auto* p = static_cast<char*>(values);
    for (size_t done = 0; done < n;) {
      const size_t k = std::min(n - done, kMaxCount);
      check(MPI_Allreduce(MPI_IN_PLACE, p + done * elem, static_cast<int>(k), type, MPI_SUM, comm_),
            "MPI_Allreduce");
      done += k;
    }
  }

  // Runs on the communication thread. Parts larger than MPI's int counts allow go in rounds:
  // each round moves at most 1 GiB in total, so no call comes near the 2 GiB limit.
  std::vector<std::byte> gather_all(const std::vector<std::byte>& mine) {
    const auto n = static_cast<size_t>(size_);
    std::vector<int64_t> sizes(n);
    const int64_t my = static_cast<int64_t>(mine.size());
    check(MPI_Allgather(&my, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm_),
          "MPI_Allgather (sizes)");
    std::vector<size_t> offset(n + 1, 0);
    for (size_t r = 0; r < n; ++r) offset[r + 1] = offset[r] + static_cast<size_t>(sizes[r]);
    std::vector<std::byte> out(offset[n]);
    const size_t chunk = std::max<size_t>(1, kMaxCount / n);
    const size_t largest = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));
    std::vector<std::byte> recv;
    std::vector<int> counts(n), displs(n);
    for (size_t start = 0; start < largest; start += chunk) {
      int total = 0;
      for (size_t r = 0; r < n; ++r) {
        const size_t s = static_cast<size_t>(sizes[r]);
        counts[r] = static_cast<int>(s > start ? std::min(chunk, s - start) : 0);
        displs[r] = total;
        total += counts[r];
      }
      recv.resize(static_cast<size_t>(total));
      const int mine_count = counts[static_cast<size_t>(rank_)];
      check(MPI_Allgatherv(mine_count ? mine.data() + start : nullptr, mine_count, MPI_BYTE,
                           recv.data(), counts.data(), displs.data(), MPI_BYTE, comm_),
            "MPI_Allgatherv");
      for (size_t r = 0; r < n; ++r)
        if (counts[r])
          std::memcpy(out.data() + offset[r] + start, recv.data() + displs[r],
                      static_cast<size_t>(counts[r]));
    }
    return out;
  }

  MPI_Comm comm_;
  bool owned_;
  std::shared_ptr<CommThread> thread_;
  std::shared_ptr<StatusResponder> responder_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_id_ = 0;
};

}  // namespace

namespace {

// A communicator over `comm` (MPI initialised) with its communication thread and, where MPI
// allows, the status channel the watchdog asks; `owned`: freed with it.
std::unique_ptr<Communicator> make_over(MPI_Comm comm, bool owned, double timeout_s) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Created before the communication thread: MPI_Comm_dup runs here, with no other MPI caller.
  std::shared_ptr<StatusResponder> responder;
  if (MpiRuntime::get().multiple() && size > 1)
    responder = std::make_shared<StatusResponder>(comm, rank, size);
  auto thread = std::make_shared<CommThread>(
      timeout_s, [rank, size, timeout_s, responder](const CommTask& t, double waited) {
        watchdog_abort(rank, size, t, waited, timeout_s, responder.get());
      });
  if (responder) responder->start(thread.get());
  return std::make_unique<MpiCommunicator>(comm, owned, std::move(thread), std::move(responder));
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_world(double timeout_s) {
  MpiRuntime::get().init();
  return make_over(MPI_COMM_WORLD, false, timeout_s);
}

std::unique_ptr<Communicator> make_mpi_communicator(int64_t fortran_handle, double timeout_s) {
  MpiRuntime::get().init();
  const MPI_Comm given = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_handle));
  int size = 0;
  if (given == MPI_COMM_NULL || MPI_Comm_size(given, &size) != MPI_SUCCESS)
    throw_usage("the MPI communicator handle " + std::to_string(fortran_handle) +
                " is not a valid communicator of this process");
  // A duplicate: crest's collectives never match messages of the caller's own on its handle.
  MPI_Comm dup = MPI_COMM_NULL;
  check(MPI_Comm_dup(given, &dup), "MPI_Comm_dup (the given communicator)");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  return make_over(dup, true, timeout_s);
}

void mpi_abort_if_parallel(int exit_code) {
  MpiRuntime& rt = MpiRuntime::get();
  if (rt.active() && rt.world_size() > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace crest::dist_detail
