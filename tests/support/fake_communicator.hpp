// A Communicator that pretends to be rank `rank` of `size` without any other process: for unit
// tests of code that only asks who it is (sharding, staging, bucket layout). Collectives act
// as if every other rank contributed nothing (sums are identities, gathers return this rank's
// part), which is enough for layout and ordering tests and never for arithmetic ones.
#pragma once
#include <functional>
#include <utility>

#include "crest/dist/communicator.hpp"

namespace crest::test {

class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  std::string name() const override { return "fake"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  int node_id() const override { return 0; }
  void barrier() override {}
  void allreduce_sum(double* values, size_t n) override {
    if (other_ranks_add) other_ranks_add(values, n);
  }
  void allreduce_sum(int64_t*, size_t) override {}
  std::unique_ptr<PendingCollective> start_allreduce(float* values, size_t n, float scale,
                                                     std::string what) override {
    return scaled(values, n, scale, std::move(what));
  }
  std::unique_ptr<PendingCollective> start_allreduce(double* values, size_t n, double scale,
                                                     std::string what) override {
    return scaled(values, n, scale, std::move(what));
  }
  std::unique_ptr<PendingCollective> start_allreduce_16(uint16_t* values, size_t, Float16,
                                                        std::string what) override {
    started.push_back(what);
    if (saw_buffer) saw_buffer(values);
    struct Done final : PendingCollective {
      void wait() override {}
      Timing timing() const override { return {}; }
    };
    return std::make_unique<Done>();
  }
  std::unique_ptr<PendingCollective> start_arrival(const std::string& what) override {
    started.push_back("arrival: " + what);
    struct Done final : PendingCollective {
      void wait() override {}
      Timing timing() const override { return {}; }
    };
    return std::make_unique<Done>();
  }
  void broadcast(void*, size_t, int) override {}
  std::vector<std::byte> allgatherv(const std::vector<std::byte>& m) override { return m; }
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<FakeCommunicator>(0, 1);
  }

  // What start_allreduce (and start_arrival, "arrival: ...") was asked, in order.
  std::vector<std::string> started;
  // What the other ranks add to a double allreduce_sum (unset: nothing), for arithmetic tests.
  std::function<void(double* values, size_t n)> other_ranks_add;
  // Called with the buffer of every start_allreduce and start_allreduce_16 (unset: nothing):
  // where a collective's values live.
  std::function<void(const void* values)> saw_buffer;

 private:
  // One rank's share only (the fake's other ranks add nothing), scaled; done at once.
  template <typename T>
  std::unique_ptr<PendingCollective> scaled(T* values, size_t n, T scale, std::string what) {
    started.push_back(std::move(what));
    if (saw_buffer) saw_buffer(values);
    for (size_t i = 0; i < n; ++i) values[i] *= scale;
    struct Done final : PendingCollective {
      void wait() override {}
      Timing timing() const override { return {}; }
    };
    return std::make_unique<Done>();
  }

  int rank_, size_;
};

}  // namespace crest::test
