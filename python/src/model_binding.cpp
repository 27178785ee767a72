// crest.Model's native half: a model compiled for inference (the engine Session, as crest predict
// opens it) that runs on arrays from any framework through DLPack without copies where the
// memory allows, and gives its weights as arrays under the reference names (state_dict).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "array_shapes.hpp"
#include "bindings.hpp"
#include "crest/core/bf16.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"
#include "crest/engine/session.hpp"
#include "crest/engine/trained_weights.hpp"
#include "crest/engine/weights.hpp"
#include "crest/train/batch_feed.hpp"
#include "crest/train/stop_signals.hpp"
#include "crest/train/task.hpp"
#include "crest/train/trainer.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace crest::python {
namespace {

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;
using NumpyArray = nb::ndarray<nb::numpy>;

DType dtype_of(const AnyArray& a, const std::string& what) {
  if (a.dtype() == nb::dtype<float>()) return DType::f32;
  if (a.dtype() == nb::dtype<double>()) return DType::f64;
  if (a.dtype() == nb::dtype<int64_t>()) return DType::i64;
  throw_input(what + ": arrays of float32, float64 (or int64 for counters) are taken");
}

bool c_contiguous(const AnyArray& a) {
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

// `a` (any strides) into C order at `dst`, element by element: the rare input that is a view
// (a transposed tensor, say) is gathered once.
void gather_c_order(const AnyArray& a, void* dst) {
  const size_t item = a.itemsize();
  const auto* base = static_cast<const char*>(a.data());
  std::vector<size_t> index(a.ndim(), 0);
  auto* out = static_cast<char*>(dst);
  for (size_t n = 0; n < a.size(); ++n) {
    int64_t offset = 0;
    for (size_t d = 0; d < a.ndim(); ++d) offset += static_cast<int64_t>(index[d]) * a.stride(d);
    std::memcpy(out + n * item, base + offset * static_cast<int64_t>(item), item);
    for (size_t d = a.ndim(); d-- > 0;) {
      if (++index[d] < a.shape(d)) break;
      index[d] = 0;
    }
  }
}

// A value's memory as an array: logical shape (batch, channels, spatial...) with the strides of
// its layout, so a channels-last tensor reaches PyTorch as channels-last memory, not a copy.
std::vector<int64_t> strides_of(const TensorDesc& d) {
  const std::vector<int64_t> s = d.shape.to_vector();
  std::vector<int64_t> strides(s.size(), 1);
  if (d.layout == Layout::channels_last && s.size() > 2) {
    int64_t step = s[1];  // channels innermost, then the spatial axes, then the batch
    for (size_t i = s.size(); i-- > 2;) strides[i] = step, step *= s[i];
    strides[0] = step;
    return strides;
  }
  for (size_t i = s.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * s[i + 1];
  return strides;
}

class Model {
 public:
  Model(const Config& config, const std::string& checkpoint, const std::string& weights,
        int64_t batch, int threads)
      : config_(config), task_(make_task(config)) {
    const StopSignalsBlocked blocked;  // compute threads started here inherit it (stop_signals.hpp)
    for (int64_t parts : config.dist.spatial)
      if (parts != 1)
        throw_usage(
            "dist.spatial: crest.Model runs one process; a spatially split model runs "
            "under crest predict or crest.train");
    if (batch < 0) throw_usage("batch must be >= 1 (0: data.batch_size)");
    SessionOptions so;
    so.backend = config.crest.backend;
    so.threads = threads > 0 ? threads : compute_threads_per_rank(config, 1);
    so.layout_tuning.emplace().measure = config.crest.autotune;
    so.purpose = Purpose::inference;
    so.precision = config.crest.precision;
    so.batch = batch > 0 ? batch : config.data.batch_size;
    so.seed = config.data.seed;  // the trainer's initial weights when none are loaded
    session_ = std::make_unique<Session>(task_.model.graph, so);
    if (!checkpoint.empty() || !weights.empty())
      load_trained_weights(executor().params(), task_.model.external_params, checkpoint, weights);
    feed_ = std::make_unique<BatchFeed>(executor(), task_.model);
  }

  Executor& executor() const { return session_->executor(); }
  int64_t batch_size() const { return executor().input(task_.model.sample_input).shape()[0]; }
  std::vector<int64_t> sample_shape() const {
    return config_.data.model_sample_shape().to_vector();
  }
  bool last_input_copied() const { return last_input_copied_; }

  // One forward pass on a whole batch in the data's layout; the prediction as a view of the
  // model's output, valid until the next call (`self` keeps the model alive under it).
  NumpyArray forward(nb::handle self, const AnyArray& x) {
    check_batch(x);
    const std::string& input = task_.model.sample_input;
    const DType dtype = dtype_of(x, "forward: the samples");
    if (dtype == DType::i64) throw_input("forward: samples must be float32 or float64");
    std::vector<unsigned char> gathered;
    const void* data = x.data();
    if (!c_contiguous(x)) {
      gathered.resize(x.nbytes());
      gather_c_order(x, gathered.data());
      data = gathered.data();
    }
    Shape whole(shape_of(x));
    {
      nb::gil_scoped_release released;
      const StopSignalsBlocked blocked;
      feed_->feed_samples(TensorView(const_cast<void*>(data), {whole, dtype}));
      last_input_copied_ = executor().input(input).data() != data || data != x.data();
      executor().forward(/*training=*/false);
      executor().bind_input(input, nullptr);  // the caller's array may go after this call
    }
    return output_array(self);
  }

  // Seconds of each of `repeats` executor forward passes on the model's current input, timed in
  // C++ without Python: what Python's per-call overhead is measured against
  // (scripts/bench_python.py).
  std::vector<double> time_forward(int repeats) {
    nb::gil_scoped_release released;
    const StopSignalsBlocked blocked;
    std::vector<double> seconds;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      executor().forward(/*training=*/false);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return seconds;
  }

  nb::dict state_dict() const {
    const WeightTensors w = weight_tensors(executor().params(), task_.model.external_params);
    nb::dict d;
    for (const SafetensorsEntry& e : w.entries) d[nb::str(e.name.c_str())] = copy_of(e);
    return d;
  }

  void load_state_dict(const nb::dict& arrays) {
    std::vector<SafetensorsTensor> tensors;
    std::vector<AnyArray> held;  // keeps the arrays' memory while the tensors view it
    for (const auto& [key, value] : arrays) {
      const std::string name = nb::cast<std::string>(key);
      const AnyArray a = nb::cast<AnyArray>(value);
      if (!c_contiguous(a)) throw_input("state_dict: '" + name + "' is not C-contiguous");
      const DType dtype = dtype_of(a, "state_dict: '" + name + "'");
      SafetensorsTensor t;
      t.name = name;
      t.dtype = dtype == DType::f32   ? SafetensorsDType::F32
                : dtype == DType::f64 ? SafetensorsDType::F64
                                      : SafetensorsDType::I64;
      t.shape = shape_of(a);
      t.data = static_cast<const std::byte*>(a.data());
      t.bytes = a.nbytes();
      tensors.push_back(std::move(t));
      held.push_back(a);
    }
    load_weight_tensors(executor().params(), tensors, "state_dict", task_.model.external_params);
  }

 private:
  void check_batch(const AnyArray& x) const {
    std::vector<int64_t> want{batch_size()};
    for (int64_t d : sample_shape()) want.push_back(d);
    if (shape_of(x) != want)
      throw_input("forward: the samples have shape " + shape_text(shape_of(x)) +
                  ", this model takes " + shape_text(want) +
                  " (batch, then data.sample_shape as the model reads it)");
  }

  NumpyArray output_array(nb::handle self) {
    const TensorView p = feed_->host_prediction();
    std::vector<size_t> shape;
    for (int64_t d : p.shape().to_vector()) shape.push_back(static_cast<size_t>(d));
    const std::vector<int64_t> strides = strides_of(p.desc());
    if (p.dtype() == DType::f32 || p.dtype() == DType::f64)
      return NumpyArray(p.data(), shape.size(), shape.data(), self, strides.data(),
                        p.dtype() == DType::f32 ? nb::dtype<float>() : nb::dtype<double>());
    // A 16-bit prediction: widened into an array of its own.
    auto* floats = new float[static_cast<size_t>(p.numel())];
    const auto* codes = static_cast<const uint16_t*>(p.data());
    for (int64_t i = 0; i < p.numel(); ++i)
      floats[i] = p.dtype() == DType::bf16 ? bf16_to_float(codes[i]) : fp16_to_float(codes[i]);
    nb::capsule owner(floats, [](void* f) noexcept { delete[] static_cast<float*>(f); });
    return NumpyArray(floats, shape.size(), shape.data(), owner, strides.data(),
                      nb::dtype<float>());
  }

  static NumpyArray copy_of(const SafetensorsEntry& e) {
    const size_t bytes = static_cast<size_t>(e.shape.numel()) * dtype_size(e.dtype);
    auto* copy = new unsigned char[bytes];
    std::memcpy(copy, e.data, bytes);
    nb::capsule owner(copy, [](void* c) noexcept { delete[] static_cast<unsigned char*>(c); });
    std::vector<size_t> shape;
    for (int64_t d : e.shape.to_vector()) shape.push_back(static_cast<size_t>(d));
    const nb::dlpack::dtype dtype = e.dtype == DType::f32   ? nb::dtype<float>()
                                    : e.dtype == DType::f64 ? nb::dtype<double>()
                                                            : nb::dtype<int64_t>();
    return NumpyArray(copy, shape.size(), shape.data(), owner, nullptr, dtype);
  }

  Config config_;
  Task task_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<BatchFeed> feed_;
  bool last_input_copied_ = true;
};

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<Model>(m, "NativeModel", "A model compiled for inference (crest.Model wraps it).")
      .def(nb::init<const Config&, const std::string&, const std::string&, int64_t, int>(),
           "config"_a, "checkpoint"_a, "weights"_a, "batch"_a, "threads"_a)
      .def_prop_ro("batch_size", &Model::batch_size, "Samples per forward pass (compiled).")
      .def_prop_ro("sample_shape", &Model::sample_shape,
                   "One sample's shape in the data's layout (data.sample_shape as read).")
      .def_prop_ro("last_input_copied", &Model::last_input_copied,
                   "Whether the last forward copied its input (False: read in place).")
      .def(
          "forward",
          [](nb::handle self, const AnyArray& x) {
            return nb::cast<Model&>(self).forward(self, x);
          },
          "x"_a, "The prediction for one batch, a view valid until the next call.")
      .def("time_forward", &Model::time_forward, "repeats"_a,
           "Seconds of each of `repeats` forward passes run in C++ (a benchmark's baseline).")
      .def("state_dict", &Model::state_dict, "Copies of the weights under the reference names.")
      .def("load_state_dict", &Model::load_state_dict, "arrays"_a,
           "Loads every weight; all or nothing, errors name the key.");
}

}  // namespace crest::python
