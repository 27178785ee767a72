#include "crest/graph/param_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"

namespace crest {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Uniform in [0, 1) from the top 53 bits: the same on every standard library.
double uniform01(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

template <typename T>
void fill_slot(T* w, const ParamSlot& s, uint64_t seed) {
  std::mt19937_64 gen(fnv1a(s.name, seed * 0x9E3779B97F4A7C15ull + 1));
  const double fan_in = static_cast<double>(s.spec.fan_in),
               fan_out = static_cast<double>(s.spec.fan_out);
  for (size_t i = 0; i < s.count; ++i) {
    double v = 0;
    switch (s.spec.init) {
      case Init::zeros:
        v = 0;
        break;
      case Init::ones:
        v = 1;
        break;
      case Init::glorot_uniform: {
        const double limit = std::sqrt(6.0 / (fan_in + fan_out));
        v = (2 * uniform01(gen) - 1) * limit;
        break;
      }
      case Init::kaiming_normal: {
        // Box-Muller; std = sqrt(2 / fan_in) (He et al., fan-in mode, ReLU gain).
        const double u1 = 1.0 - uniform01(gen), u2 = uniform01(gen);
        v = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2) * std::sqrt(2.0 / fan_in);
        break;
      }
      case Init::torch_default: {
        // PyTorch's Conv/Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
        const double bound = 1.0 / std::sqrt(fan_in);
        v = (2 * uniform01(gen) - 1) * bound;
        break;
      }
    }
    w[i] = static_cast<T>(v);
  }
}

}  // namespace

ParamStore::ParamStore(std::vector<ParamSlot> slots, DType dtype, Backend& backend)
    : dtype_(dtype), ops_(backend.vector_ops(dtype)) {
  // Trainable first so the optimizer sees one contiguous prefix.
  std::stable_partition(slots.begin(), slots.end(),
                        [](const ParamSlot& s) { return s.spec.trainable; });
  size_t offset = 0;
  bool sideband_placed = false;
  for (auto& s : slots) {
    if (!s.spec.trainable && !std::exchange(sideband_placed, true)) offset += kSidebandBytes;
    s.count = static_cast<size_t>(s.shape.numel());
    s.offset = offset;
    offset = align_up(offset + s.count * dtype_size(dtype), 256);
    if (s.spec.trainable) trainable_bytes_ = offset;
  }
  // The sideband follows the trainable prefix directly, whatever comes after it.
  offset = std::max(offset, trainable_bytes_ + kSidebandBytes);
  slots_ = std::move(slots);
  // Zeroed by the resource. Padding between slices stays zero forever, so whole-buffer optimizer
  // updates are harmless.
  values_ = Buffer(offset, 256, backend.memory());
  grads_ = Buffer(offset, 256, backend.memory());
}

VectorOps& ParamStore::ops() const {
  CREST_CHECK(ops_ != nullptr, "a parameter store without a backend has no operations");
  return *ops_;
}

int64_t ParamStore::parameter_count() const {
  int64_t n = 0;
  for (const auto& s : slots_)
    if (s.spec.trainable) n += static_cast<int64_t>(s.count);
  return n;
}

TensorView ParamStore::value(size_t i) const {
  const auto& s = slots_.at(i);
  return TensorView(static_cast<char*>(values_.data()) + s.offset,
                    {s.shape, dtype_, Device::cpu, Layout::plain});
}

TensorView ParamStore::grad(size_t i) const {
  const auto& s = slots_.at(i);
  return TensorView(static_cast<char*>(grads_.data()) + s.offset,
                    {s.shape, dtype_, Device::cpu, Layout::plain});
}

int ParamStore::find(const std::string& name) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].name == name) return static_cast<int>(i);
  return -1;
}

void ParamStore::initialize(uint64_t seed) {
  if (dtype_ != DType::f32 && dtype_ != DType::f64)
    throw_runtime("parameter initialisation supports f32 and f64 only");
  // Every slot is written and the padding of a fresh host copy is zero: nothing to fetch.
  HostStaging host(memory(), values_.data(), values_.bytes(), /*fetch=*/false);
  for (const ParamSlot& s : slots_) {
    char* w = host.as<char>() + s.offset;
    if (dtype_ == DType::f32)
      fill_slot(reinterpret_cast<float*>(w), s, seed);
    else
      fill_slot(reinterpret_cast<double*>(w), s, seed);
  }
  host.commit();
}

}  // namespace crest
