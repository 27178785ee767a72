#include "crest/train/batch_feed.hpp"

#include <cstring>

#include "crest/core/error.hpp"
#include "crest/core/half_codes.hpp"
#include "crest/core/host_staging.hpp"

namespace crest {
namespace {

// Element-wise conversion between the loader's dtypes and a model's (f32 data into a float64
// oracle model, say).
template <typename To, typename From>
void convert(const From* from, To* to, size_t n) {
  for (size_t i = 0; i < n; ++i) to[i] = static_cast<To>(from[i]);
}

// n elements of from_dtype at `from` into host memory of to_dtype at `to`.
void convert_into(const void* from, DType from_dtype, void* to, DType to_dtype, size_t n) {
  if (from_dtype == to_dtype) {
    std::memcpy(to, from, n * dtype_size(from_dtype));
    return;
  }
  if (from_dtype == DType::f32 && is_half(to_dtype))
    // A 16-bit input (CompileOptions::half_inputs).
    return floats_to_half_codes(static_cast<const float*>(from), static_cast<uint16_t*>(to), n,
                                to_dtype);
  if (from_dtype == DType::f32 && to_dtype == DType::f64)
    return convert(static_cast<const float*>(from), static_cast<double*>(to), n);
  if (from_dtype == DType::f64 && to_dtype == DType::f32)
    return convert(static_cast<const double*>(from), static_cast<float*>(to), n);
  throw_input("a batch of " + dtype_name(from_dtype) + " cannot feed a model input of " +
              dtype_name(to_dtype));
}

void check_sizes(const std::string& input, const TensorView& from, int64_t model_numel) {
  if (from.numel() != model_numel)
    throw_input("the data's " + input + " batch has " + std::to_string(from.numel()) +
                " elements, the model's input '" + input + "' takes " +
                std::to_string(model_numel));
}

}  // namespace

DType loader_sample_dtype(const Executor& ex, const BuiltModel& model) {
  const DType input = ex.input(model.sample_input).dtype();
  return is_half(input) ? input : DType::f32;
}

TensorView samples_of(const TensorView& batch, int64_t first, int64_t count) {
  const int64_t places = batch.shape()[0];
  CREST_CHECK(first >= 0 && count > 0 && first + count <= places, "samples_of: no such samples");
  const size_t per_sample = batch.bytes() / static_cast<size_t>(places);
  TensorDesc d = batch.desc();
  d.shape = batch.shape().without_batch().with_batch(count);
  return TensorView(static_cast<char*>(batch.data()) + static_cast<size_t>(first) * per_sample, d);
}

BatchFeed::BatchFeed(Executor& ex, const BuiltModel& model)
    : BatchFeed(ex, model, {model.sample_input, model.target_input}, model.prediction) {}

BatchFeed::BatchFeed(Executor& ex, const BuiltModel& model, std::vector<std::string> inputs,
                     ValueId prediction)
    : ex_(ex), model_(model), inputs_(std::move(inputs)), prediction_(prediction) {}

const TensorView& BatchFeed::tensor_of(const LoadedBatch& batch, const std::string& input) const {
  if (input == model_.sample_input) return batch.sample;
  CREST_CHECK(input == model_.target_input, "no batch tensor feeds input '" + input + "'");
  return batch.target;
}

void BatchFeed::feed(const LoadedBatch& batch) {
  for (const std::string& input : inputs_) feed_one(input, tensor_of(batch, input));
}

void BatchFeed::stage(const LoadedBatch& batch) {
  for (const std::string& input : inputs_) {
    const TensorView& from = tensor_of(batch, input);
    const TensorView to = ex_.input(input);
    const bool whole = copies_whole(input, from, to);
    if (!whole && !(converts(input, from, to) && ex_.can_bind_input(input))) continue;
    DeviceInput& d = device_input(input);
    drop_staged(input);
    const void* host = whole ? from.data() : converted_on_host(input, from, to);
    d.staged = start_copy(d, 1 - d.bound, host, to.bytes(), from.data());
  }
}

// The copies are forgotten too: the loader may put another batch at the same address, which a
// staged copy of this one must not pass for.
void BatchFeed::done_with(const LoadedBatch& batch) {
  for (auto& [input, d] : device_inputs_) {
    const TensorView& t = tensor_of(batch, input);
    const auto* begin = static_cast<const char*>(t.data());
    for (DeviceCopy* c : {&d.reading, &d.staged}) {
      const auto* of = static_cast<const char*>(c->batch);
      if (c->copy && of >= begin && of < begin + t.bytes()) retire(d, *c);
    }
  }
}

void BatchFeed::feed_part(const LoadedBatch& batch, int64_t first, int64_t count) {
  for (const std::string& input : inputs_)
    feed_one(input, samples_of(tensor_of(batch, input), first, count));
}

void BatchFeed::feed_samples(const TensorView& samples) { feed_one(model_.sample_input, samples); }

void BatchFeed::feed_copies_of(const LoadedBatch& batch, int64_t place) {
  CREST_CHECK(place >= 0 && place < batch.sample.shape()[0], "feed_copies_of: no such place");
  for (const std::string& input : inputs_) feed_copies(input, tensor_of(batch, input), place);
}

void BatchFeed::feed_copies(const std::string& input, const TensorView& from, int64_t place) {
  ex_.bind_input(input, nullptr);  // the copies go into the model's own storage
  if (auto it = device_inputs_.find(input); it != device_inputs_.end()) {
    drop_staged(input);  // it may be writing there
    it->second.bound = 0;
  }
  const TensorView to = ex_.input(input);
  const int64_t places = from.shape()[0];
  const bool blocks = holds_blocks(input, from, to);
  const auto from_per_sample = static_cast<size_t>(from.numel() / places);
  const void* sample = static_cast<const char*>(from.data()) +
                       static_cast<size_t>(place) * from_per_sample * dtype_size(from.dtype());
  // Under a split, what is copied is this rank's block of the sample.
  if (const SpatialSplit* split = split_of(input); split && !blocks)
    sample = block_of(*split, input, sample, 1, from.dtype());
  // The compiled batch may be smaller than the loaded one (a pipeline's micro-batch).
  const int64_t to_places = to.shape()[0];
  const auto per_sample = static_cast<size_t>(to.numel() / to_places);
  void* host = host_side(input, to);
  const size_t to_bytes = per_sample * dtype_size(to.dtype());
  for (int64_t i = 0; i < to_places; ++i)
    convert_into(sample, from.dtype(), static_cast<char*>(host) + static_cast<size_t>(i) * to_bytes,
                 to.dtype(), per_sample);
  to_model(to, host);
}

void* BatchFeed::host_side(const std::string& input, const TensorView& to) {
  MemoryResource& memory = ex_.backend().memory();
  if (memory.is_host()) return to.data();
  Buffer& staging = staging_[input];
  // A staged copy may still be reading it.
  if (auto it = device_inputs_.find(input); it != device_inputs_.end() && staging.data())
    for (const DeviceCopy* c : {&it->second.reading, &it->second.staged})
      if (c->copy && c->source == staging.data()) c->copy->wait();
  if (staging.bytes() != to.bytes()) staging = Buffer(to.bytes(), 256, memory.staging_memory());
  return staging.data();
}

void BatchFeed::to_model(const TensorView& to, const void* host_side) {
  if (host_side != to.data())
    ex_.backend().memory().copy_to_device(to.data(), host_side, to.bytes());
}

void BatchFeed::feed_one(const std::string& input, const TensorView& from) {
  const TensorView to = ex_.input(input);
  holds_blocks(input, from, to);  // checks the batch's size, naming the input
  MemoryResource& memory = ex_.backend().memory();
  if (staged_for(input, from)) return feed_device(input, from);
  const auto n = static_cast<size_t>(from.numel());
  if (!split_of(input) && from.dtype() == DType::f32 && is_half(to.dtype()) && memory.is_host()) {
    // A 16-bit input: narrowed straight from the loader's buffer by the backend's parallel loop
    // (the reorder it replaces was parallel too), rounded as convert_into rounds.
    ex_.vec().narrow(from.data(), 1.0, to.data(), n, to.dtype());
    return;
  }
  // A split input is never bound in place: the model holds a block, copied from the batch.
  if (converts(input, from, to)) {
    drop_staged(input);  // another batch's
    return to_model(to, converted_on_host(input, from, to));
  }
  // The loader's buffers are host memory: the model reads them in place only where its memory
  // is host memory too.
  if (memory.is_host() && ex_.bind_input(input, from.data())) return;
  if (copies_whole(input, from, to)) return feed_device(input, from);
  memory.copy_to_device(to.data(), from.data(), from.bytes());
}

bool BatchFeed::copies_whole(const std::string& input, const TensorView& from,
                             const TensorView& to) const {
  return !ex_.backend().memory().is_host() && !split_of(input) && from.dtype() == to.dtype() &&
         !holds_blocks(input, from, to) && ex_.can_bind_input(input);
}

BatchFeed::DeviceInput& BatchFeed::device_input(const std::string& input) {
  auto it = device_inputs_.find(input);
  if (it != device_inputs_.end()) return it->second;
  DeviceInput& d = device_inputs_[input];
  d.planned = ex_.input(input).data();  // nothing is bound yet: the input's own storage
  return d;
}

BatchFeed::DeviceCopy BatchFeed::start_copy(DeviceInput& d, int buffer, const void* host,
                                            size_t bytes, const void* batch) {
  MemoryResource& memory = ex_.backend().memory();
  if (buffer == 1 && d.own.bytes() != bytes)
    d.own = named_buffer("the next batch's inputs", bytes, memory);
  void* dst = buffer == 0 ? d.planned : d.own.data();
  std::unique_ptr<PendingCopy> reuse;
  if (!d.spare.empty()) {
    reuse = std::move(d.spare.back());
    d.spare.pop_back();
  }
  return {memory.start_copy_to_device(dst, host, bytes, std::move(reuse)), host, batch, buffer};
}

bool BatchFeed::converts(const std::string& input, const TensorView& from,
                         const TensorView& to) const {
  return split_of(input) || from.dtype() != to.dtype();
}

void* BatchFeed::converted_on_host(const std::string& input, const TensorView& from,
                                   const TensorView& to) {
  const void* values = from.data();
  if (const SpatialSplit* split = split_of(input); split && !holds_blocks(input, from, to))
    values = block_of(*split, input, from.data(), to.shape()[0], from.dtype());
  void* host = host_side(input, to);
  convert_into(values, from.dtype(), host, to.dtype(), static_cast<size_t>(to.numel()));
  return host;
}

bool BatchFeed::staged_for(const std::string& input, const TensorView& from) const {
  const auto it = device_inputs_.find(input);
  return it != device_inputs_.end() && it->second.staged.copy &&
         it->second.staged.batch == from.data();
}

// Waits for the copy and keeps it for a later one (its host source may change from now on).
void BatchFeed::retire(DeviceInput& d, DeviceCopy& c) {
  if (c.copy) {
    c.copy->wait();
    d.spare.push_back(std::move(c.copy));
  }
  c = {};
}

// The staged copy where it is this batch's, else a copy into the buffer the model reads (after
// the steps issued so far); the model is pointed at it and its next work ordered after it.
void BatchFeed::feed_device(const std::string& input, const TensorView& from) {
  DeviceInput& d = device_input(input);
  if (staged_for(input, from)) {
    retire(d, d.reading);
    d.reading = std::move(d.staged);
    d.staged = {};
  } else {
    drop_staged(input);
    retire(d, d.reading);
    d.reading = start_copy(d, d.bound, from.data(), from.bytes(), from.data());
    // Unstaged, the batch is done with once fed (its loader may take it back at once), as with
    // copy_to_device: only a staged batch waits for done_with.
    d.reading.copy->wait();
  }
  d.bound = d.reading.buffer;
  ex_.bind_input(input, d.bound == 0 ? nullptr : d.own.data());
  d.reading.copy->order_before_stream();
}

void BatchFeed::drop_staged(const std::string& input) {
  auto it = device_inputs_.find(input);
  if (it != device_inputs_.end()) retire(it->second, it->second.staged);
}

bool BatchFeed::holds_blocks(const std::string& input, const TensorView& from,
                             const TensorView& to) const {
  const int64_t samples = from.shape()[0];
  const int64_t block_per_sample = to.numel() / to.shape()[0];
  if (split_of(input) && from.numel() == samples * block_per_sample &&
      from.numel() != whole_shape(input, samples).numel())
    return true;  // a loader that read this rank's blocks (sample_block)
  check_sizes(input, from, whole_shape(input, samples).numel());
  return false;
}

std::optional<SampleBlock> BatchFeed::sample_block() const {
  const SpatialSplit* split = split_of(model_.sample_input);
  if (!split) return std::nullopt;
  const Shape whole = whole_shape(model_.sample_input, 1);  // [1, c, spatial...]
  const Shape local = split->local_shape(whole);
  SampleBlock b;
  b.begin = split->block_start(whole);
  for (size_t a = 0; a < b.begin.size(); ++a)
    b.end.push_back(b.begin[a] + local[static_cast<int>(a) + 2]);
  return b;
}

const SpatialSplit* BatchFeed::split_of(const std::string& input) const {
  const SpatialSplit* split = ex_.options().spatial.get();
  return split && split->splits(whole_shape(input, 1)) ? split : nullptr;
}

Shape BatchFeed::whole_shape(const std::string& input, int64_t batch) const {
  for (const GraphInput& in : model_.graph.inputs())
    if (in.name == input) {
      std::vector<int64_t> dims{batch};
      for (int64_t d : in.per_sample.to_vector()) dims.push_back(d);
      return Shape(dims);
    }
  throw_input("the model has no input '" + input + "'");
}

Layout BatchFeed::layout_of(const std::string& input) const {
  for (const GraphInput& in : model_.graph.inputs())
    if (in.name == input) return in.layout;
  throw_input("the model has no input '" + input + "'");
}

const void* BatchFeed::block_of(const SpatialSplit& split, const std::string& input,
                                const void* from, int64_t samples, DType dtype) {
  const Shape whole = whole_shape(input, samples);
  block_.resize(static_cast<size_t>(split.local_shape(whole).numel()) * dtype_size(dtype));
  split.copy_block(from, whole, layout_of(input), dtype, block_.data());
  return block_.data();
}

TensorView BatchFeed::host_prediction() {
  CREST_CHECK(prediction_ >= 0, "this program holds no prediction");
  return host_readable(ex_.backend().memory(), ex_.output(prediction_), prediction_copy_);
}

}  // namespace crest
