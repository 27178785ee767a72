#include "crest/graph/param_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Uniform in [0, 1) from the top 53 bits: the same on every standard library.
double uniform01(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

// `count` values of slot `s` (all of them: a divided slot's whole parameter).
template <typename T>
void fill_slot(T* w, size_t count, const ParamSlot& s, uint64_t seed) {
  std::mt19937_64 gen(fnv1a(s.name, seed * 0x9E3779B97F4A7C15ull + 1));
  const double fan_in = static_cast<double>(s.spec.fan_in),
               fan_out = static_cast<double>(s.spec.fan_out);
  for (size_t i = 0; i < count; ++i) {
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
      case Init::kaiming_normal:
      case Init::kaiming_normal_fan_out: {
        // Box-Muller; std = sqrt(2 / fan) (He et al., ReLU gain) in fan-in or fan-out mode.
        const double fan = s.spec.init == Init::kaiming_normal ? fan_in : fan_out;
        const double u1 = 1.0 - uniform01(gen), u2 = uniform01(gen);
        v = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2) * std::sqrt(2.0 / fan);
        break;
      }
      case Init::he_uniform:  // Keras' variance_scaling(2, fan_in, uniform)
        v = (2 * uniform01(gen) - 1) * std::sqrt(6.0 / fan_in);
        break;
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

ParamStore::ParamStore(std::vector<ParamSlot> slots, DType dtype, Backend& backend, bool allocate,
                       bool gradients)
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
    // A part reserves the group's largest part: the layout is the same on every rank.
    const size_t reserved =
        s.spec.shard ? static_cast<size_t>(s.spec.shard->reserved_count()) : s.count;
    CREST_CHECK(reserved >= s.count, "a parameter part larger than its reservation");
    offset = align_up(offset + reserved * dtype_size(dtype), 256);
    if (s.spec.trainable) trainable_bytes_ = offset;
  }
  // The sideband follows the trainable prefix directly, whatever comes after it.
  offset = std::max(offset, trainable_bytes_ + kSidebandBytes);
  slots_ = std::move(slots);
  bytes_ = offset;
  memory_ = &backend.memory();
  if (!allocate) return;
  // Zeroed by the resource. Padding between slices stays zero forever, so whole-buffer optimizer
  // updates are harmless.
  values_ = std::make_shared<Buffer>(named_buffer("the model's parameters", offset, *memory_));
  if (gradients)
    grads_ = std::make_shared<Buffer>(named_buffer("the parameters' gradients", offset, *memory_));
}

ParamStore ParamStore::sharing_buffers_of(const ParamStore& owner, Backend& backend) {
  CREST_CHECK(&backend.memory() == owner.memory_, "sharing parameters across memories");
  ParamStore s;
  s.slots_ = owner.slots_;
  s.dtype_ = owner.dtype_;
  s.values_ = owner.values_;
  s.grads_ = owner.grads_;
  s.memory_ = owner.memory_;
  s.ops_ = backend.vector_ops(owner.dtype_);
  s.bytes_ = owner.bytes_;
  s.trainable_bytes_ = owner.trainable_bytes_;
  return s;
}

VectorOps& ParamStore::ops() const {
  CREST_CHECK(ops_ != nullptr, "a parameter store without a backend has no operations");
  return *ops_;
}

int64_t ParamStore::parameter_count() const {
  int64_t n = 0;
  for (const auto& s : slots_)
    if (s.spec.trainable)
      n += s.spec.shard ? s.spec.shard->whole_shape().numel() : static_cast<int64_t>(s.count);
  return n;
}

double ParamStore::grad_sum_squares() const {
  double replicated = 0;
  std::vector<double> parts;
  size_t begin = 0;  // of the replicated run in elements
  const size_t element = dtype_size(dtype_);
  for (const ParamSlot& s : slots_) {
    if (!s.spec.trainable || !s.spec.shard) continue;
    replicated += ops().sum_squares(static_cast<char*>(grads()) + begin * element,
                                    s.offset / element - begin);
    parts.push_back(ops().sum_squares(static_cast<char*>(grads()) + s.offset, s.count));
    begin = align_up(s.offset + s.count * element, 256) / element;
  }
  replicated += ops().sum_squares(static_cast<char*>(grads()) + begin * element,
                                  trainable_bytes_ / element - begin);
  return replicated + sum_over_groups(parts);
}

void ParamStore::grad_sum_squares_into(double* out) const {
  CREST_CHECK(!divided(), "a divided store's gradient norm sums over groups: grad_sum_squares");
  ops().sum_squares_into(grads(), trainable_bytes_ / dtype_size(dtype_), out);
}

double ParamStore::sum_over_groups(std::vector<double>& parts) const {
  double sum = 0;
  size_t i = 0;
  for (const ParamSlot& s : slots_)
    if (s.spec.trainable && s.spec.shard) {
      s.spec.shard->sum_over_group(&parts.at(i), 1);
      sum += parts[i++];
    }
  return sum;
}

std::vector<ParamStore::ByteRange> ParamStore::replicated_ranges(size_t end) const {
  std::vector<ByteRange> out;
  size_t begin = 0;
  for (const ParamSlot& s : slots_) {
    if (!s.spec.shard || s.offset >= end) continue;
    if (s.offset > begin) out.push_back({begin, s.offset});
    begin = align_up(s.offset + s.count * dtype_size(dtype_), 256);
  }
  if (end > begin) out.push_back({begin, end});
  return out;
}

bool ParamStore::divided() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const ParamSlot& s) { return s.spec.shard != nullptr; });
}

TensorView ParamStore::value(size_t i) const {
  const auto& s = slots_.at(i);
  return TensorView(static_cast<char*>(values()) + s.offset,
                    {s.shape, dtype_, Device::cpu, Layout::plain});
}

TensorView ParamStore::grad(size_t i) const {
  const auto& s = slots_.at(i);
  return TensorView(static_cast<char*>(grads()) + s.offset,
                    {s.shape, dtype_, Device::cpu, Layout::plain});
}

int ParamStore::find(const std::string& name) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].name == name) return static_cast<int>(i);
  return -1;
}

void ParamStore::fill(void* w, size_t count, const ParamSlot& s, uint64_t seed) const {
  if (dtype_ == DType::f32)
    fill_slot(static_cast<float*>(w), count, s, seed);
  else
    fill_slot(static_cast<double*>(w), count, s, seed);
}

void ParamStore::initialize(uint64_t seed) {
  CREST_CHECK(allocated(), "initialising a parameter layout without buffers");
  if (dtype_ != DType::f32 && dtype_ != DType::f64)
    throw_runtime("parameter initialisation supports f32 and f64 only");
  // Every slot is written and the padding of a fresh host copy is zero: nothing to fetch.
  HostStaging host(memory(), values(), bytes_, /*fetch=*/false);
  for (const ParamSlot& s : slots_) {
    char* w = host.as<char>() + s.offset;
    if (s.spec.shard) {  // the whole parameter, as an unsplit run draws it, then this part
      const size_t whole = static_cast<size_t>(s.spec.shard->whole_shape().numel());
      std::vector<char> all(whole * dtype_size(dtype_));
      fill(all.data(), whole, s, seed);
      s.spec.shard->take_part(all.data(), w, dtype_);
    } else {
      fill(w, s.count, s, seed);
    }
  }
  host.commit();
}

}  // namespace crest
