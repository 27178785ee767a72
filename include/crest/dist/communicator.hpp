// Communicator: the process world a run lives in (DESIGN.md "Distribution"). Everything that
// depends on rank or size — data sharding, staging, metric reduction, gradient allreduce — talks
// to this interface, so one process and an MPI job run the same code. The single-process
// implementation lives here; the MPI (and later NCCL) implementations plug in behind it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace crest {

// 16-bit float formats a collective can sum: bfloat16 (float32's exponent, 8 significant bits)
// and IEEE fp16 (5 exponent bits, 11 significant bits).
enum class Float16 { bf16, fp16 };

// std::chrono::steady_clock's time in seconds (since its epoch): the time base of
// PendingCollective::Timing, timelines and the watchdog's deadlines.
double steady_seconds();

// A collective that was started and not waited for (a gradient bucket's allreduce running while
// backward goes on). wait() returns once this rank's part is complete; it rethrows the
// collective's error, and past the communicator's timeout it aborts the job with a message.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
  // When it was queued, started running and completed, in seconds of std::chrono::steady_clock
  // (time_since_epoch); valid after wait(). Timelines and the hidden-communication figure.
  struct Timing {
    double queued = 0, started = 0, done = 0;
  };
  virtual Timing timing() const = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "single", "mpi", ...
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank and size among the processes on this node (shared memory): node-local staging and
  // thread counts depend on them.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // This node's name among the ranks: the lowest rank on it (the same on every rank of a node),
  // so split(node_id(), rank()) gives the node's ranks (staging a node's parts of the files).
  virtual int node_id() const = 0;

  virtual void barrier() = 0;
  // In-place sums over all ranks, identical results everywhere (metrics are reduced as sums and
  // counts, never as means of means).
  virtual void allreduce_sum(double* values, size_t n) = 0;
  virtual void allreduce_sum(int64_t* values, size_t n) = 0;
  // In-place float sum, then multiplication by `scale` (1/size() gives the average: sum then
  // scale, as gradient averaging needs). Starts and returns at once; `what` names the collective
  // in watchdog messages. `values` must stay valid and untouched until wait() returns.
  virtual std::unique_ptr<PendingCollective> start_allreduce(float* values, size_t n, float scale,
                                                             std::string what) = 0;
  // The same in float64 (crest.precision: float64, the oracle mode, on several ranks).
  virtual std::unique_ptr<PendingCollective> start_allreduce(double* values, size_t n, double scale,
                                                             std::string what) = 0;
  // The same for 16-bit floats (gradient compression): an in-place sum, each addition done in
  // float and rounded back to the 16-bit format. No scale: the caller scales before narrowing.
  virtual std::unique_ptr<PendingCollective> start_allreduce_16(uint16_t* values, size_t n,
                                                                Float16 format,
                                                                std::string what) = 0;
  // Every rank's arrival, queued like a collective: complete once every rank has started it. It
  // waits for the last rank without holding a core, so the collectives queued after it start
  // with every rank there and spin only while their data moves (the gradient lag's exchange,
  // which travels while this rank's compute threads have the cores: a blocking collective
  // waiting for a slower rank would take a core from them). Like a blocking collective it holds
  // the communication thread until it completes: this rank's point-to-point messages queued
  // after it wait. The default is barrier(), done before it returns.
  virtual std::unique_ptr<PendingCollective> start_arrival(const std::string& what);
  // Rank `root`'s bytes replace everyone's; all ranks pass the same size.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank contributes `mine`; all ranks receive the concatenation in rank order.
  virtual std::vector<std::byte> allgatherv(const std::vector<std::byte>& mine) = 0;
  // Like allgatherv, but returns each rank's part separately (index = rank).
  std::vector<std::vector<std::byte>> allgather_parts(const std::vector<std::byte>& mine);
  // The largest of every rank's `v` (benchmarks report the slowest rank).
  double allreduce_max(double v);
  // Ranks with the same `color` form a new communicator, ordered by (key, rank).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Point-to-point messages between two ranks (crest search: group leaders and the scheduler,
  // weights between groups). Neither call holds the communication thread while it waits, so the
  // collectives of this rank's other communicators go on meanwhile. A communicator without them
  // (the default) throws crest::Error (runtime).
  static constexpr int kAnySource = -1;
  struct Message {
    int source = 0;
    int tag = 0;
    std::vector<std::byte> bytes;
  };
  // Returns once `bytes` has been handed over (received or buffered by the library).
  virtual void send(int dest, int tag, const std::vector<std::byte>& bytes);
  // A message with `tag` from `source` (kAnySource: any rank) when one has arrived, else nullopt
  // at once. Messages from one rank with one tag arrive in the order they were sent.
  virtual std::optional<Message> try_receive(int source, int tag);
  // Waits for such a message (polls try_receive); past `timeout_s` throws crest::Error (runtime)
  // naming `what`.
  Message receive(int source, int tag, double timeout_s, const std::string& what);

  // A neighbour exchange (the halos of a spatially split tensor): every receive and send is
  // posted at once and then all are waited for, so two ranks sending to each other never
  // deadlock, whatever the message sizes. Both sides know each message's size; a message from
  // one rank with one tag is matched in posting order. Buffers stay untouched by the caller until
  // the call returns. Like send(), it polls and never holds the communication thread while it
  // waits; past the communicator's timeout it throws crest::Error (runtime) naming `what`. A
  // communicator without point-to-point messages (the default) accepts only an empty exchange.
  struct Outgoing {
    int dest = 0, tag = 0;
    const void* data = nullptr;
    size_t bytes = 0;
  };
  struct Incoming {
    int source = 0, tag = 0;
    void* data = nullptr;
    size_t bytes = 0;
  };
  virtual void exchange(const std::vector<Outgoing>& sends, const std::vector<Incoming>& receives,
                        const std::string& what);
  // The same exchange, started and not waited for, so the caller computes while the messages
  // travel (a split convolution's interior while its halo arrives). The communication thread
  // drives the messages until they are complete, so they progress while the caller computes;
  // wait() returns once every message has arrived and been sent, rethrowing the error named
  // `what` past the communicator's timeout; timing() says when the messages were posted and when
  // they completed. Buffers stay untouched by the caller until wait() returns. The default runs
  // exchange() at once and returns it done.
  virtual std::unique_ptr<PendingCollective> start_exchange(const std::vector<Outgoing>& sends,
                                                            const std::vector<Incoming>& receives,
                                                            const std::string& what);
  // One message sent without waiting for its receiver (a pipeline stage's activations, which the
  // next stage receives whenever its schedule comes to them): unlike start_exchange, it never
  // holds the communication thread, so this rank's receives and collectives go on while the
  // message waits. `data` stays untouched until wait() returns; wait() polls, and past the
  // communicator's timeout throws crest::Error (runtime) naming `what`. The default sends at
  // once through exchange().
  virtual std::unique_ptr<PendingCollective> start_send(const Outgoing& message,
                                                        const std::string& what);
};

// One process: rank 0 of 1. Collectives are identities (start_allreduce only scales).
std::unique_ptr<Communicator> make_single_process_communicator();

// The process world of a run (src/dist/world.cpp chooses).
struct WorldOptions {
  std::string backend = "auto";  // auto: MPI when a launcher started this process; mpi; single
  double timeout_s = 300;        // watchdog deadline of every collective
};
std::unique_ptr<Communicator> make_world_communicator(const WorldOptions& options);
// The ranks of an MPI communicator the program made itself, given as its Fortran handle
// (MPI_Comm_c2f(comm), mpi4py's Comm.py2f()): crest works on a duplicate of it, with the same
// communication thread and watchdog (`timeout_s`) as the world's. Every rank of it must call this.
// MPI is initialised here when the program has not done so.
std::unique_ptr<Communicator> communicator_from_mpi_handle(int64_t fortran_handle,
                                                           double timeout_s);
// True when environment variables of mpirun/srun/jsrun/flux say this process is one rank of a
// parallel job (read before MPI_Init, as MPI itself cannot be asked yet).
bool launched_as_parallel_job();
// After a fatal error on one rank of a running MPI job: brings every rank down (MPI_Abort) so
// nobody waits forever in a collective. Returns without doing anything when MPI is not active
// or the job has one rank.
void abort_parallel_job(int exit_code);

}  // namespace crest
