// DeviceCollectives "on" the pretend device (test::CountingBackend), as test::FakeCommunicator's
// collectives are: the other ranks add nothing, so a sum is this rank's share, then scaled on the
// device. Counts what it was asked into a DeviceCalls that outlives the GradientSync owning it;
// its waits block on the backend's stream (so a wait inside a recording is seen as one).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/device_collectives.hpp"
#include "support/counting_backend.hpp"

namespace crest::test {

struct DeviceCalls {
  int allreduces = 0, waits = 0, joins = 0, stream_waits = 0;
  std::vector<double> timeouts;    // of every wait and stream wait, in order
  std::vector<std::string> whats;  // what each of them named
};

class FakeDeviceCollectives final : public DeviceCollectives {
 public:
  FakeDeviceCollectives(CountingBackend& backend, DeviceCalls& calls)
      : backend_(backend), calls_(calls) {}
  std::string name() const override { return "fake-nccl"; }
  void allreduce_sum(void* values, size_t n, DType dtype, double scale) override {
    ++calls_.allreduces;
    EXPECT_TRUE(backend_.memory().owns(values)) << "a device collective on host memory";
    if (scale != 1.0) backend_.vector_ops(dtype)->scale(scale, values, values, n);
  }
  void wait(double timeout_s, const std::string& what) override {
    ++calls_.waits;
    blocked(timeout_s, what);
  }
  void join() override { ++calls_.joins; }
  void wait_stream(double timeout_s, const std::string& what) override {
    ++calls_.stream_waits;
    blocked(timeout_s, what);
  }

 private:
  void blocked(double timeout_s, const std::string& what) {
    calls_.timeouts.push_back(timeout_s);
    calls_.whats.push_back(what);
    backend_.stream().synchronize();
  }
  CountingBackend& backend_;
  DeviceCalls& calls_;
};

}  // namespace crest::test
