#include "python_samples.hpp"

#include <nanobind/ndarray.h>

#include <cstring>
#include <string>
#include <vector>

#include "array_shapes.hpp"
#include "crest/core/error.hpp"
#include "crest/train/dataset_registry.hpp"

namespace nb = nanobind;

namespace crest::python {
namespace {

class PythonSamples : public SampleSource {
 public:
  PythonSamples(nb::object dataset, SampleSpec spec, int64_t size, std::string split)
      : dataset_(std::move(dataset)), spec_(spec), split_(std::move(split)) {
    names_.reserve(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i)
      names_.push_back("the Python " + split_ + " dataset's item " + std::to_string(i));
  }
  ~PythonSamples() override {
    nb::gil_scoped_acquire gil;  // the dataset is a Python object
    dataset_.reset();
  }

  std::string format() const override { return "python"; }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return static_cast<int64_t>(names_.size()); }
  const std::string& path(int64_t i) const override { return names_[static_cast<size_t>(i)]; }

  // The item's sample and target, converted to float32 (int32 labels) in C order, one after the
  // other: what decode copies out, and what the loader's cache keeps.
  void read(int64_t i, std::vector<std::byte>& payload) const override {
    payload.resize(spec_.x_bytes() + spec_.y_bytes());
    nb::gil_scoped_acquire gil;
    try {
      const nb::object item = dataset_[nb::int_(i)];
      if (nb::len(item) != 2)
        throw_input(path(i) + ": expected (sample, target), got " + std::to_string(nb::len(item)) +
                    " items");
      copy_out<float>(item[0], spec_.x_shape, "sample", "data.sample_shape", i, payload.data());
      std::byte* y = payload.data() + spec_.x_bytes();
      if (spec_.y_integer)
        copy_out<int32_t>(item[1], spec_.y_shape, "target", "data.target_shape", i, y);
      else
        copy_out<float>(item[1], spec_.y_shape, "target", "data.target_shape", i, y);
    } catch (nb::python_error& e) {
      throw_input(path(i) + ": " + e.what());
    } catch (const nb::cast_error&) {
      throw_input(path(i) + ": the sample and target must be arrays of numbers");
    }
  }

  void decode(int64_t /*i*/, std::span<const std::byte> payload, float* x, void* y) const override {
    std::memcpy(x, payload.data(), spec_.x_bytes());
    std::memcpy(y, payload.data() + spec_.x_bytes(), spec_.y_bytes());
  }

 private:
  // `value` as a C-order array of T (numpy and torch convert other dtypes and strides).
  template <typename T>
  void copy_out(nb::handle value, const Shape& want, const char* what, const char* key, int64_t i,
                std::byte* dst) const {
    const auto a = nb::cast<nb::ndarray<T, nb::c_contig, nb::device::cpu>>(value);
    if (shape_of(a) != want.to_vector())
      throw_input(path(i) + ": its " + what + " has shape " + shape_text(shape_of(a)) + ", " + key +
                  " gives " + want.str());
    std::memcpy(dst, a.data(), a.nbytes());
  }

  nb::object dataset_;
  SampleSpec spec_;
  std::string split_;
  std::vector<std::string> names_;
};

}  // namespace

std::shared_ptr<SampleSource> python_samples(const Config& config, nb::object dataset,
                                             int64_t limit, const std::string& split) {
  if (!nb::hasattr(dataset, "__len__") || !nb::hasattr(dataset, "__getitem__"))
    throw_usage("the " + split +
                " data must have __len__ and __getitem__ (a list or a map-style "
                "dataset); crest.train reads any other iterable into a list first");
  int64_t size = static_cast<int64_t>(nb::len(dataset));
  if (size == 0) throw_input("the Python " + split + " dataset is empty");
  if (limit > 0 && limit < size) size = limit;
  SampleSpec spec;
  spec.x_shape = config.data.model_sample_shape();
  spec.y_shape = config.data.target_shape;
  spec.y_integer = find_dataset_type(config.data.name).labels;
  return std::make_shared<PythonSamples>(std::move(dataset), spec, size, split);
}

}  // namespace crest::python
