// The same parameters on the reference backend and on a pretend device (test::CountingBackend),
// for optimizer tests that step one optimizer on each and compare the results to the bit: the
// device's must equal the host's while its VectorOps count what a GPU would wait for.
#pragma once
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "crest/optim/optimizer.hpp"
#include "support/counting_backend.hpp"
#include "support/param_slots.hpp"

namespace crest::test {

class DeviceAndHostStores {
 public:
  // conv1.weight, a bias, a frozen running mean, fc1.weight and a tensor of zeros (a trust
  // ratio's special case), in float64.
  DeviceAndHostStores()
      : host(slots(), DType::f64, *reference_), on_device(slots(), DType::f64, device) {}

  // Step `step`'s gradients (and at step 0 the weights), the same on both stores.
  void fill(uint64_t step) {
    std::mt19937_64 gen(step + 1);
    std::uniform_real_distribution<double> u(-1, 1);
    for (size_t s = 0; s < host.slots().size(); ++s) {
      const bool zero = host.slots()[s].name == "zero.weight";
      for (size_t i = 0; i < host.slots()[s].count; ++i) {
        if (step == 0) host.value(s).as<double>()[i] = zero ? 0.0 : u(gen);
        if (host.slots()[s].spec.trainable) host.grad(s).as<double>()[i] = 0.1 * u(gen);
      }
    }
    std::memcpy(on_device.values(), host.values(), host.bytes());
    std::memcpy(on_device.grads(), host.grads(), host.trainable_bytes());
  }

  bool same_values() const {
    return std::memcmp(on_device.values(), host.values(), host.bytes()) == 0;
  }

 private:
  static std::vector<ParamSlot> slots() {
    return {flat_slot("conv1.weight", 6), flat_slot("conv1.bias", 3),
            flat_slot("bn1.running_mean", 4, false), flat_slot("fc1.weight", 5),
            flat_slot("zero.weight", 2)};
  }
  std::unique_ptr<Backend> reference_ = make_backend("reference");

 public:
  CountingBackend device{/*pretend_device=*/true};
  ParamStore host, on_device;
};

// Whether two optimizers' state buffers hold the same bytes.
inline bool same_state(Optimizer& a, Optimizer& b) {
  const auto sa = a.state(), sb = b.state();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (std::memcmp(sa[i].second->data(), sb[i].second->data(), sa[i].second->bytes()) != 0)
      return false;
  return true;
}

}  // namespace crest::test
