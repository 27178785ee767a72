// Point-to-point messages of the Communicator interface: the defaults of communicators that have
// none, and the blocking receive built on try_receive; and the default arrival (a barrier).
#include <chrono>
#include <ctime>

#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {

void Communicator::send(int, int, const std::vector<std::byte>&) {
  throw_runtime("the " + name() + " communicator has no point-to-point messages");
}

std::optional<Communicator::Message> Communicator::try_receive(int, int) {
  throw_runtime("the " + name() + " communicator has no point-to-point messages");
}

void Communicator::exchange(const std::vector<Outgoing>& sends,
                            const std::vector<Incoming>& receives, const std::string& what) {
  if (sends.empty() && receives.empty()) return;
  throw_runtime(what + ": the " + name() + " communicator has no point-to-point messages");
}

namespace {

// An exchange that completed before start_exchange returned.
class CompletedExchange final : public PendingCollective {
 public:
  explicit CompletedExchange(Timing t) : timing_(t) {}
  void wait() override {}
  Timing timing() const override { return timing_; }

 private:
  Timing timing_;
};

}  // namespace

std::unique_ptr<PendingCollective> Communicator::start_arrival(const std::string&) {
  const double posted = steady_seconds();
  barrier();
  return std::make_unique<CompletedExchange>(
      PendingCollective::Timing{posted, posted, steady_seconds()});
}

std::unique_ptr<PendingCollective> Communicator::start_send(const Outgoing& message,
                                                            const std::string& what) {
  return start_exchange({message}, {}, what);
}

std::unique_ptr<PendingCollective> Communicator::start_exchange(
    const std::vector<Outgoing>& sends, const std::vector<Incoming>& receives,
    const std::string& what) {
  const double posted = steady_seconds();
  exchange(sends, receives, what);
  return std::make_unique<CompletedExchange>(
      PendingCollective::Timing{posted, posted, steady_seconds()});
}

// Polling, not a blocking MPI_Recv: the communication thread stays free for collectives, and a
// wait for a message that may take minutes (the next epoch's report) costs no core.
Communicator::Message Communicator::receive(int source, int tag, double timeout_s,
                                            const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  long pause_ns = 20'000;  // grows to 5 ms: quick answers stay quick, long waits stay cheap
  for (;;) {
    if (auto m = try_receive(source, tag)) return std::move(*m);
    if (std::chrono::steady_clock::now() > deadline)
      throw_runtime(
          what + ": no message from " +
          (source == kAnySource ? std::string("any rank") : "rank " + std::to_string(source)) +
          " within " + std::to_string(static_cast<int>(timeout_s)) + " s");
    const timespec pause{0, pause_ns};
    nanosleep(&pause, nullptr);
    pause_ns = std::min(pause_ns * 2, 5'000'000L);
  }
}

}  // namespace crest
