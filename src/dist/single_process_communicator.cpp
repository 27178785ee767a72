#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>

#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {
namespace {

class DoneCollective final : public PendingCollective {
 public:
  explicit DoneCollective(double t) : at_(t) {}
  void wait() override {}
  Timing timing() const override { return {at_, at_, at_}; }

 private:
  double at_;
};

class SingleProcessCommunicator final : public Communicator {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int node_id() const override { return 0; }
  void barrier() override {}
  void allreduce_sum(double*, size_t) override {}
  void allreduce_sum(int64_t*, size_t) override {}
  std::unique_ptr<PendingCollective> start_allreduce(float* values, size_t n, float scale,
                                                     std::string) override {
    return scaled(values, n, scale);
  }
  std::unique_ptr<PendingCollective> start_allreduce(double* values, size_t n, double scale,
                                                     std::string) override {
    return scaled(values, n, scale);
  }
  // The sum over one rank is its own values: only the scale remains.
  template <typename T>
  static std::unique_ptr<PendingCollective> scaled(T* values, size_t n, T scale) {
    const double t = steady_seconds();
    if (scale != T(1))
      for (size_t i = 0; i < n; ++i) values[i] *= scale;
    return std::make_unique<DoneCollective>(t);
  }
  std::unique_ptr<PendingCollective> start_allreduce_16(uint16_t*, size_t, Float16,
                                                        std::string) override {
    return std::make_unique<DoneCollective>(steady_seconds());
  }
  void broadcast(void*, size_t, int) override {}
  std::vector<std::byte> allgatherv(const std::vector<std::byte>& mine) override { return mine; }
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SingleProcessCommunicator>();
  }
  // Messages to itself: a queue (thread-safe: a study's scheduler and its group may be two
  // threads of this process).
  void send(int dest, int tag, const std::vector<std::byte>& bytes) override {
    if (dest != 0)
      throw Error(ErrorKind::runtime, "send to rank " + std::to_string(dest) + " of a 1-rank job");
    std::lock_guard lock(mu_);
    queue_.push_back({0, tag, bytes});
  }
  std::optional<Message> try_receive(int, int tag) override {
    std::lock_guard lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (it->tag == tag) {
        Message m = std::move(*it);
        queue_.erase(it);
        return m;
      }
    return std::nullopt;
  }

 private:
  std::mutex mu_;
  std::deque<Message> queue_;
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

double Communicator::allreduce_max(double v) {
  std::vector<std::byte> mine(sizeof v);
  std::memcpy(mine.data(), &v, sizeof v);
  const std::vector<std::byte> all = allgatherv(mine);
  for (size_t at = 0; at + sizeof v <= all.size(); at += sizeof v) {
    double x = 0;
    std::memcpy(&x, all.data() + at, sizeof x);
    v = std::max(v, x);
  }
  return v;
}

// Every rank's part is framed by its length, so parts can be told apart after the gather.
std::vector<std::vector<std::byte>> Communicator::allgather_parts(
    const std::vector<std::byte>& mine) {
  const uint64_t n = mine.size();
  std::vector<std::byte> framed(sizeof n + mine.size());
  for (size_t i = 0; i < sizeof n; ++i)
    framed[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);  // little endian
  if (!mine.empty()) std::memcpy(&framed[sizeof n], mine.data(), mine.size());
  const std::vector<std::byte> all = allgatherv(framed);
  std::vector<std::vector<std::byte>> parts;
  size_t at = 0;
  while (at + sizeof(uint64_t) <= all.size()) {
    uint64_t len = 0;
    for (size_t i = 0; i < sizeof len; ++i) len |= static_cast<uint64_t>(all[at + i]) << (8 * i);
    at += sizeof len;
    parts.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at),
                       all.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  }
  return parts;
}

}  // namespace crest
