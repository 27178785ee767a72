#include "batch_feed.hpp"

#include <cstring>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// Element-wise conversion between the loader's dtypes and a model's (f32 data into a float64
// oracle model, say).
template <typename To, typename From>
void convert(const From* from, To* to, size_t n) {
  for (size_t i = 0; i < n; ++i) to[i] = static_cast<To>(from[i]);
}

void convert_into(const TensorView& from, const TensorView& to) {
  const auto n = static_cast<size_t>(from.numel());
  if (from.dtype() == DType::f32 && to.dtype() == DType::f64)
    return convert(from.as<float>(), to.as<double>(), n);
  if (from.dtype() == DType::f64 && to.dtype() == DType::f32)
    return convert(from.as<double>(), to.as<float>(), n);
  throw_input(std::string("a batch of ") + dtype_name(from.dtype()) +
              " cannot feed a model input of " + dtype_name(to.dtype()));
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
  if (from.dtype() != to.dtype()) return convert_into(from, to);
  if (!ex_.bind_input(input, from.data())) std::memcpy(to.data(), from.data(), from.bytes());
}

TensorView BatchFeed::host_prediction() {
  const TensorView p = ex_.output(model_.prediction);
  prediction_copy_.resize(p.bytes());
  std::memcpy(prediction_copy_.data(), p.data(), p.bytes());
  return TensorView(prediction_copy_.data(), p.desc());
}

}  // namespace crest
