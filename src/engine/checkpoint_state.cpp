// Writing and loading a checkpoint file's tensors: the parameters and the optimizer's state
// (crest/engine/checkpoint_file.hpp has the layout).
#include <algorithm>
#include <map>
#include <set>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/engine/checkpoint_file.hpp"
#include "crest/engine/weights.hpp"
#include "crest/engine/whole_parts.hpp"

namespace crest::checkpoint_file {

namespace {

// Every tensor of a checkpoint (state_layout), pointing into host views of the parameter values
// and each optimizer state buffer (the buffers themselves on host memory, copies elsewhere).
// A divided parameter (ParamSpec::shard) is its whole tensor: gathered for writing (`wholes`),
// read into a whole-sized buffer and cut to the part for loading (`parts`).
struct HostTensors {
  std::vector<HostStaging> buffers;
  std::vector<StateEntry> entries;
  PartsFromWhole parts;
  void commit(WholeParts* keep = nullptr) {
    parts.take(keep);
    for (HostStaging& b : buffers) b.commit();
  }
};

// `writable`: the entries will be loaded into, then commit() copies them back. Else `wholes`
// holds the divided parameters' whole tensors.
HostTensors host_tensors(const ParamStore& params, Optimizer* optimizer, bool writable,
                         const WholeParts& wholes = {}) {
  HostTensors out;
  std::map<std::string, const std::byte*> bases;  // by state ("": the values)
  auto stage = [&](void* data, size_t bytes) -> const std::byte* {
    if (writable)
      out.buffers.emplace_back(params.memory(), data, bytes);
    else
      out.buffers.emplace_back(params.memory(), static_cast<const void*>(data), bytes);
    return static_cast<const std::byte*>(out.buffers.back().data());
  };
  const auto states =
      optimizer ? optimizer->state() : std::vector<std::pair<std::string, Buffer*>>{};
  out.buffers.reserve(1 + states.size());
  bases[""] = stage(params.values(), params.bytes());
  for (const auto& [state, buffer] : states) bases[state] = stage(buffer->data(), buffer->bytes());
  out.entries =
      state_layout(params, optimizer ? state_names(*optimizer) : std::vector<std::string>{});
  for (StateEntry& e : out.entries) {
    const size_t s = e.tensor.slot;
    const std::byte* data = bases.at(e.tensor.state) + params.slots()[s].offset;
    if (params.slots()[s].spec.shard) {
      data = writable ? static_cast<const std::byte*>(out.parts.whole_for(
                            params, s, e.tensor.state, const_cast<std::byte*>(data)))
                      : wholes.find(s, e.tensor.state);
      CREST_CHECK(data != nullptr, "a divided parameter's whole tensor was not gathered");
    }
    e.entry.data = data;
  }
  return out;
}

// Every entry is in `file` with its dtype and shape, and `file` holds nothing else.
void check_tensors(const SafetensorsFile& file, const std::vector<StateEntry>& entries) {
  const std::string& path = file.path();
  for (const auto& [e, of] : entries) {
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
                                   [&](const auto& e) { return e.entry.name == t.name; });
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

std::vector<std::string> state_names(Optimizer& optimizer) {
  std::vector<std::string> names;
  for (const auto& [state, buffer] : optimizer.state()) names.push_back(state);
  return names;
}

std::vector<StateEntry> state_layout(const ParamStore& layout,
                                     const std::vector<std::string>& states) {
  std::vector<StateEntry> out;
  const std::vector<ParamSlot>& slots = layout.slots();
  for (size_t s = 0; s < slots.size(); ++s)
    out.push_back(
        {{kModelPrefix + slots[s].name, layout.dtype(), file_shape(slots[s]), nullptr}, {"", s}});
  for (const std::string& state : states)
    for (size_t s = 0; s < slots.size(); ++s)
      if (slots[s].spec.trainable)
        out.push_back({{"optimizer/" + state + "/" + slots[s].name, layout.dtype(),
                        file_shape(slots[s]), nullptr},
                       {state, s}});
  return out;
}

void write(const std::string& path, Metadata metadata, const ParamStore& layout,
           const std::vector<std::string>& states, const StateBytes& bytes,
           const std::function<void(size_t, size_t)>& progress) {
  const std::vector<StateEntry> tensors = state_layout(layout, states);
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const StateEntry& t : tensors) entries.push_back(t.entry);
  metadata["format"] = kFormat;
  metadata["checksum"] = crc_text(0);  // the checksum's length: replaced once it is known
  SafetensorsWriter out(path, entries, metadata, progress);
  // The checksum runs over the tensors in name order: the file's order, all of one dtype.
  uint32_t crc = metadata_crc(metadata);
  const std::string* previous = nullptr;
  for (size_t i : out.order()) {
    const SafetensorsEntry& e = entries[i];
    CREST_CHECK(!previous || *previous < e.name, path + ": checkpoint tensors out of name order");
    previous = &e.name;
    const void* data = bytes(tensors[i].tensor);
    crc = tensor_crc(crc, e.name, data, static_cast<size_t>(e.shape.numel()) * dtype_size(e.dtype));
    out.write_next(data);
  }
  out.replace_metadata("checksum", crc_text(crc));
  out.commit();
}

void with_host_bytes(const ParamStore& params, Optimizer* optimizer, const WholeParts& wholes,
                     const std::function<void(const StateBytes&)>& use) {
  const HostTensors host = host_tensors(params, optimizer, /*writable=*/false, wholes);
  std::map<std::pair<std::string, size_t>, const void*> data;
  for (const StateEntry& e : host.entries) data[{e.tensor.state, e.tensor.slot}] = e.entry.data;
  use([&](const StateTensor& t) { return data.at({t.state, t.slot}); });
}

void write(const std::string& path, Metadata metadata, const ParamStore& params,
           Optimizer& optimizer, const std::function<void(size_t, size_t)>& progress,
           const WholeParts& wholes) {
  with_host_bytes(params, &optimizer, wholes, [&](const StateBytes& bytes) {
    write(path, std::move(metadata), params, state_names(optimizer), bytes, progress);
  });
}

void load(const SafetensorsFile& file, ParamStore& params, Optimizer& optimizer,
          WholeParts* wholes) {
  HostTensors host = host_tensors(params, &optimizer, /*writable=*/true);
  check_tensors(file, host.entries);
  for (const auto& [e, of] : host.entries)
    file.read_into(e.name, e.dtype, e.shape, const_cast<void*>(e.data));
  host.commit(wholes);
}

void check_layout(const SafetensorsFile& file, const ParamStore& layout,
                  const std::vector<std::string>& states) {
  check_tensors(file, state_layout(layout, states));
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
