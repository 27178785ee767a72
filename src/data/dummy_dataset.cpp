#include "crest/data/dummy_dataset.hpp"

#include <algorithm>

#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"

namespace crest {
namespace {

using rng::splitmix64;
using rng::unit_double;

template <typename T>
void fill(const DummyDataset& ds, const std::vector<int64_t>& idx, T* x, T* y, int64_t per_sample,
          int64_t targets, uint64_t seed) {
  (void)ds;
  const auto n = static_cast<int64_t>(idx.size());
  for (int64_t b = 0; b < n; ++b) {
    const uint64_t base =
        splitmix64(seed ^ splitmix64(static_cast<uint64_t>(idx[static_cast<size_t>(b)])));
    T* xs = x + b * per_sample;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < per_sample; ++i)
      xs[i] = static_cast<T>(unit_double(splitmix64(base + static_cast<uint64_t>(i))));
    for (int64_t t = 0; t < targets; ++t)
      y[b * targets + t] =
          static_cast<T>(2 * unit_double(splitmix64(~base + static_cast<uint64_t>(t))) - 1);
  }
}

}  // namespace

DummyDataset::DummyDataset(const Shape& sample_shape, int64_t target_size, int64_t n_samples,
                           uint64_t seed)
    : sample_shape_(sample_shape), target_size_(target_size), n_(n_samples), seed_(seed) {
  if (n_samples < 1) throw_input("the dummy dataset needs at least one sample");
}

void DummyDataset::fill_batch(const std::vector<int64_t>& indices, const TensorView& x,
                              const TensorView& y) const {
  const int64_t per_sample = sample_shape_.numel();
  CREST_CHECK(x.numel() == per_sample * static_cast<int64_t>(indices.size()), "dummy batch shape");
  CREST_CHECK(y.numel() == target_size_ * static_cast<int64_t>(indices.size()),
              "dummy target shape");
  if (x.dtype() == DType::f32)
    fill(*this, indices, x.as<float>(), y.as<float>(), per_sample, target_size_, seed_);
  else if (x.dtype() == DType::f64)
    fill(*this, indices, x.as<double>(), y.as<double>(), per_sample, target_size_, seed_);
  else
    throw_runtime("dummy dataset: unsupported dtype " + dtype_name(x.dtype()));
}

}  // namespace crest

namespace crest {
namespace {

class DummySource final : public SampleSource {
 public:
  DummySource(const Shape& sample_shape, int64_t targets, int64_t n, uint64_t seed)
      : ds_(sample_shape, targets, n, seed), name_("<dummy>") {
    spec_.x_shape = sample_shape;
    spec_.y_shape = Shape{targets};
  }
  std::string format() const override { return "dummy"; }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return ds_.size(); }
  const std::string& path(int64_t) const override { return name_; }
  void read(int64_t, std::vector<std::byte>& payload) const override { payload.clear(); }
  void decode(int64_t i, std::span<const std::byte>, float* x, void* y) const override {
    ds_.fill_batch(
        {i}, TensorView(x, {spec_.x_shape.with_batch(1), DType::f32, Device::cpu, Layout::plain}),
        TensorView(y, {spec_.y_shape.with_batch(1), DType::f32, Device::cpu, Layout::plain}));
  }

 private:
  DummyDataset ds_;
  SampleSpec spec_;
  std::string name_;
};

}  // namespace

std::shared_ptr<SampleSource> make_dummy_source(const Shape& sample_shape, int64_t target_size,
                                                int64_t n_samples, uint64_t seed) {
  return std::make_shared<DummySource>(sample_shape, target_size, n_samples, seed);
}

}  // namespace crest
