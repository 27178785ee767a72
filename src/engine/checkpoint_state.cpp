// Writing and loading a checkpoint file's tensors: the parameters and the optimizer's state
// (crest/engine/checkpoint_file.hpp has the layout).
#include <algorithm>
#include <set>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/engine/checkpoint_file.hpp"
#include "crest/engine/weights.hpp"
#include "crest/engine/whole_parts.hpp"

namespace crest::checkpoint_file {

namespace {

// Every tensor of a checkpoint, by its file name: model/<param>, optimizer/<state>/<param>,
// pointing into host views of the parameter values and each optimizer state buffer (the buffers
// themselves on host memory, copies elsewhere).
// A divided parameter (ParamSpec::shard) is its whole tensor: gathered for writing (`wholes`),
// read into a whole-sized buffer and cut to the part for loading (`parts`).
struct HostTensors {
  std::vector<HostStaging> buffers;
  std::vector<SafetensorsEntry> entries;
  PartsFromWhole parts;
  void commit(WholeParts* keep = nullptr) {
    parts.take(keep);
    for (HostStaging& b : buffers) b.commit();
  }
};

// `writable`: the entries will be loaded into, then commit() copies them back. Else `wholes`
// holds the divided parameters' whole tensors.
HostTensors host_tensors(const ParamStore& params, Optimizer& optimizer, bool writable,
                         const WholeParts& wholes = {}) {
  HostTensors out;
  const auto states = optimizer.state();
  out.buffers.reserve(1 + states.size());
  auto stage = [&](void* data, size_t bytes) -> const std::byte* {
    if (writable)
      out.buffers.emplace_back(params.memory(), data, bytes);
    else
      out.buffers.emplace_back(params.memory(), static_cast<const void*>(data), bytes);
    return static_cast<const std::byte*>(out.buffers.back().data());
  };
  auto entry = [&](const std::string& name, size_t s, const std::byte* base,
                   const std::string& state) {
    const ParamSlot& slot = params.slots()[s];
    const std::byte* data = base + slot.offset;
    if (slot.spec.shard) {
      data = writable ? static_cast<const std::byte*>(
                            out.parts.whole_for(params, s, state, const_cast<std::byte*>(data)))
                      : wholes.find(s, state);
      CREST_CHECK(data != nullptr, "a divided parameter's whole tensor was not gathered");
    }
    out.entries.push_back({name, params.dtype(), file_shape(slot), data});
  };
  const std::byte* values = stage(params.values(), params.bytes());
  for (size_t s = 0; s < params.slots().size(); ++s)
    entry(kModelPrefix + params.slots()[s].name, s, values, "");
  for (const auto& [state, buffer] : states) {
    const std::byte* data = stage(buffer->data(), buffer->bytes());
    for (size_t s = 0; s < params.slots().size(); ++s)
      if (params.slots()[s].spec.trainable)
        entry("optimizer/" + state + "/" + params.slots()[s].name, s, data, state);
  }
  return out;
}

// Every entry is in `file` with its dtype and shape, and `file` holds nothing else.
void check_tensors(const SafetensorsFile& file, const std::vector<SafetensorsEntry>& entries) {
  const std::string& path = file.path();
  for (const auto& e : entries) {
    const SafetensorsTensor* t = file.find(e.name);
    if (!t)
      defect(path,
             "checkpoint lacks '" + e.name + "' " + e.shape.str() +
                 " (was it written for another model? model settings cannot change on resume)");
    if (t->dtype != to_safetensors_dtype(e.dtype) || t->shape != e.shape.to_vector())
      defect(path, "checkpoint tensor '" + e.name + "' is " + safetensors_dtype_name(t->dtype) +
                       " " + t->crest_shape().str() + ", this model needs " +
                       safetensors_dtype_name(to_safetensors_dtype(e.dtype)) + " " + e.shape.str());
  }
  if (file.tensors().size() == entries.size()) return;
  for (const auto& t : file.tensors()) {
    const bool known = std::any_of(entries.begin(), entries.end(),
                                   [&](const auto& e) { return e.name == t.name; });
    if (!known) defect(path, "checkpoint tensor '" + t.name + "' is not part of this model");
  }
}

// Checks one checkpoint tensor against the slot it loads into, before anything is loaded.
void check_model_tensor(const SafetensorsFile& file, const ParamSlot& slot) {
  const std::string key = kModelPrefix + slot.name;
  const SafetensorsTensor* t = file.find(key);
  const Shape shape = file_shape(slot);
  if (!t)
    defect(file.path(), "checkpoint lacks '" + key + "' " + shape.str() +
                            " (was it written for another model or other model settings?)");
  if (t->dtype != SafetensorsDType::F32 && t->dtype != SafetensorsDType::F64)
    defect(file.path(), "checkpoint tensor '" + key + "' has dtype " +
                            safetensors_dtype_name(t->dtype) + " (expected F32 or F64)");
  if (t->shape != shape.to_vector())
    defect(file.path(), "checkpoint tensor '" + key + "' is " + t->crest_shape().str() +
                            ", this model needs " + shape.str());
}

}  // namespace

void write(const std::string& path, Metadata metadata, const ParamStore& params,
           Optimizer& optimizer, const std::function<void(size_t, size_t)>& progress,
           const WholeParts& wholes) {
  const HostTensors host = host_tensors(params, optimizer, /*writable=*/false, wholes);
  TensorBytes tensors;
  for (const auto& e : host.entries)
    tensors.push_back(
        {e.name, {e.data, static_cast<size_t>(e.shape.numel()) * dtype_size(e.dtype)}});
  metadata["format"] = kFormat;
  metadata["checksum"] = crc_text(content_crc(metadata, tensors));
  write_safetensors(path, host.entries, metadata, progress);
}

void load(const SafetensorsFile& file, ParamStore& params, Optimizer& optimizer,
          WholeParts* wholes) {
  HostTensors host = host_tensors(params, optimizer, /*writable=*/true);
  check_tensors(file, host.entries);
  for (const auto& e : host.entries)
    file.read_into(e.name, e.dtype, e.shape, const_cast<void*>(e.data));
  host.commit(wholes);
}

void load_parameters(const SafetensorsFile& file, ParamStore& params) {
  std::set<std::string> expected;
  for (const ParamSlot& slot : params.slots()) {
    check_model_tensor(file, slot);
    expected.insert(kModelPrefix + slot.name);
  }
  for (const auto& t : file.tensors())
    if (t.name.starts_with(kModelPrefix) && !expected.count(t.name))
      defect(file.path(), "checkpoint tensor '" + t.name + "' is not a parameter of this model");
  store_tensors(params, [&](const ParamSlot& slot) -> const SafetensorsTensor& {
    return file.at(kModelPrefix + slot.name);
  });
}

}  // namespace crest::checkpoint_file
