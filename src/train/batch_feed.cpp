#include "batch_feed.hpp"

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"

namespace crest {
namespace {

// Element-wise conversion between the loader's dtypes and a model's (f32 data into a float64
// oracle model, say).
template <typename To, typename From>
void convert(const From* from, To* to, size_t n) {
  for (size_t i = 0; i < n; ++i) to[i] = static_cast<To>(from[i]);
}

// `to` is host memory of to_dtype.
void convert_into(const TensorView& from, void* to, DType to_dtype) {
  const auto n = static_cast<size_t>(from.numel());
  if (from.dtype() == DType::f32 && to_dtype == DType::f64)
    return convert(from.as<float>(), static_cast<double*>(to), n);
  if (from.dtype() == DType::f64 && to_dtype == DType::f32)
    return convert(from.as<double>(), static_cast<float*>(to), n);
  throw_input("a batch of " + dtype_name(from.dtype()) + " cannot feed a model input of " +
              dtype_name(to_dtype));
}

}  // namespace

BatchFeed::BatchFeed(Executor& ex, const BuiltModel& model) : ex_(ex), model_(model) {}

void BatchFeed::feed(const LoadedBatch& batch) {
  feed_one(model_.sample_input, batch.sample);
  feed_one(model_.target_input, batch.target);
}

void BatchFeed::feed_one(const std::string& input, const TensorView& from) {
  const TensorView to = ex_.input(input);
  if (from.numel() != to.numel())
    throw_input("the data's " + input + " batch has " + std::to_string(from.numel()) +
                " elements, the model's input '" + input + "' takes " + std::to_string(to.numel()));
  MemoryResource& memory = ex_.backend().memory();
  if (from.dtype() != to.dtype()) {
    HostStaging staged(memory, to.data(), to.bytes(), /*fetch=*/false);
    convert_into(from, staged.data(), to.dtype());
    return staged.commit();
  }
  // The loader's buffers are host memory: the model reads them in place only where its memory
  // is host memory too.
  if (memory.is_host() && ex_.bind_input(input, from.data())) return;
  memory.copy_to_device(to.data(), from.data(), from.bytes());
}

TensorView BatchFeed::host_prediction() {
  const TensorView p = ex_.output(model_.prediction);
  MemoryResource& memory = ex_.backend().memory();
  if (memory.is_host()) return p;
  prediction_copy_.resize(p.bytes());
  memory.copy_to_host(prediction_copy_.data(), p.data(), p.bytes());
  return TensorView(prediction_copy_.data(), p.desc());
}

}  // namespace crest
