#include "crest/engine/weights.hpp"

#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/data/safetensors.hpp"
#include "crest/engine/whole_parts.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest {
namespace {

// Where one parameter lives in a file.
struct FileTensor {
  std::string key;
  std::vector<int64_t> shape;
  bool counter = false;  // an integer count (int64 in PyTorch's files)
};

FileTensor file_tensor(const ParamSlot& slot, const ExternalNames& names) {
  const auto it = names.find(slot.name);
  if (it == names.end()) return {slot.name, file_shape(slot).to_vector(), false};
  CREST_CHECK(numel_of(it->second.shape) == file_shape(slot).numel(),
              "external shape of " + slot.name + " has another element count");
  return {it->second.key, it->second.shape, it->second.dtype == DType::i64};
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// "module." when every key of the file has it (a DistributedDataParallel state_dict).
std::string ddp_prefix(const SafetensorsFile& file) {
  constexpr std::string_view kPrefix = "module.";
  if (file.tensors().empty()) return "";
  for (const auto& t : file.tensors())
    if (!t.name.starts_with(kPrefix)) return "";
  return std::string(kPrefix);
}

void check_tensor(const std::string& path, const SafetensorsTensor* t, const FileTensor& want,
                  const std::string& key) {
  if (!t) throw_input(path + ": missing parameter '" + key + "' " + shape_text(want.shape));
  const bool floating = t->dtype == SafetensorsDType::F32 || t->dtype == SafetensorsDType::F64;
  if (!floating && !(want.counter && t->dtype == SafetensorsDType::I64))
    throw_input(path + ": parameter '" + key + "' has dtype " + safetensors_dtype_name(t->dtype) +
                (want.counter ? " (expected I64, F32 or F64)" : " (expected F32 or F64)"));
  if (t->shape != want.shape)
    throw_input(path + ": parameter '" + key + "' has shape " + shape_text(t->shape) +
                ", the model expects " + shape_text(want.shape));
}

// Checks every tensor against the model's `slots` before storing any into `into` (those slots,
// or a pipeline stage's part of them), so a bad set leaves it untouched. `find(key)` looks a
// tensor up under `prefix` + key; `all` lists every key offered.
void check_and_store(ParamStore& into, const std::vector<ParamSlot>& slots,
                     const std::string& source, const ExternalNames& names,
                     const std::string& prefix, const std::vector<SafetensorsTensor>& all,
                     const std::function<const SafetensorsTensor*(const std::string&)>& find) {
  std::set<std::string> expected;
  for (const auto& slot : slots) {
    const FileTensor want = file_tensor(slot, names);
    expected.insert(prefix + want.key);
    check_tensor(source, find(prefix + want.key), want, prefix + want.key);
  }
  for (const auto& t : all)
    if (!expected.count(t.name))
      throw_input(source + ": tensor '" + t.name + "' is not a parameter of this model");
  store_tensors(into, [&](const ParamSlot& slot) -> const SafetensorsTensor& {
    const SafetensorsTensor* t = find(prefix + file_tensor(slot, names).key);
    CREST_CHECK(t != nullptr, "weights: '" + slot.name + "' is not one of the model's parameters");
    return *t;
  });
}

}  // namespace

void load_weights(ParamStore& params, const std::string& path, const ExternalNames& names) {
  const SafetensorsFile file(path);
  check_and_store(params, params.slots(), path, names, ddp_prefix(file), file.tensors(),
                  [&](const std::string& key) { return file.find(key); });
}

void load_weights_part(ParamStore& part, const ParamStore& whole, const std::string& path,
                       const ExternalNames& names) {
  for (const ParamSlot& slot : part.slots()) {
    const int at = whole.find(slot.name);
    CREST_CHECK(at >= 0 && file_shape(whole.slots()[static_cast<size_t>(at)]) == file_shape(slot),
                "weights: the stage's '" + slot.name + "' is not the whole model's");
  }
  const SafetensorsFile file(path);
  check_and_store(part, whole.slots(), path, names, ddp_prefix(file), file.tensors(),
                  [&](const std::string& key) { return file.find(key); });
}

void load_weight_tensors(ParamStore& params, const std::vector<SafetensorsTensor>& tensors,
                         const std::string& source, const ExternalNames& names) {
  std::map<std::string, const SafetensorsTensor*> by_key;
  for (const auto& t : tensors)
    if (!by_key.emplace(t.name, &t).second)
      throw_input(source + ": tensor '" + t.name + "' is given twice");
  check_and_store(params, params.slots(), source, names, "", tensors, [&](const std::string& key) {
    const auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : it->second;
  });
}

namespace {

// Element i of a tensor as a double, with memcpy: the mapping gives no alignment guarantee.
double element(const SafetensorsTensor& t, size_t i) {
  switch (t.dtype) {
    case SafetensorsDType::F32: {
      float f;
      std::memcpy(&f, t.data + i * 4, 4);
      return f;
    }
    case SafetensorsDType::I64: {
      int64_t n;
      std::memcpy(&n, t.data + i * 8, 8);
      return static_cast<double>(n);
    }
    default: {
      double d;
      std::memcpy(&d, t.data + i * 8, 8);
      return d;
    }
  }
}

// A counter's values (an integer count kept as floats) as the int64 PyTorch's files hold.
void to_counts(const void* values, DType dtype, size_t count, int64_t* out) {
  for (size_t i = 0; i < count; ++i)
    out[i] = std::llround(dtype == DType::f32 ? static_cast<const float*>(values)[i]
                                              : static_cast<const double*>(values)[i]);
}

}  // namespace

void store_tensors(ParamStore& params,
                   const std::function<const SafetensorsTensor&(const ParamSlot&)>& tensor_of) {
  // Fetched first: the padding between slots keeps its zeros.
  HostStaging host(params.memory(), params.values(), params.bytes());
  PartsFromWhole parts;  // a divided parameter: its part of the whole tensor
  for (size_t s = 0; s < params.slots().size(); ++s) {
    const ParamSlot& slot = params.slots()[s];
    const SafetensorsTensor& t = tensor_of(slot);
    char* dst = host.as<char>() + slot.offset;
    if (slot.spec.shard) dst = static_cast<char*>(parts.whole_for(params, s, "", dst));
    const auto count = static_cast<size_t>(file_shape(slot).numel());
    for (size_t i = 0; i < count; ++i) {
      const double v = element(t, i);
      if (params.dtype() == DType::f32)
        reinterpret_cast<float*>(dst)[i] = static_cast<float>(v);
      else
        reinterpret_cast<double*>(dst)[i] = v;
    }
  }
  parts.take();
  host.commit();
}

WeightTensors weight_tensors(const ParamStore& params, const ExternalNames& names,
                             const WholeParts& wholes) {
  auto host = std::make_shared<HostStaging>(
      params.memory(), static_cast<const void*>(params.values()), params.bytes());
  WeightTensors w;
  w.host_values = std::shared_ptr<const void>(host, host->data());
  for (size_t s = 0; s < params.slots().size(); ++s) {
    const ParamSlot& slot = params.slots()[s];
    const FileTensor to = file_tensor(slot, names);
    const char* src = host->as<char>() + slot.offset;
    if (slot.spec.shard) {
      src = reinterpret_cast<const char*>(wholes.find(s));
      CREST_CHECK(src != nullptr, "a divided parameter's whole tensor was not gathered");
    }
    if (!to.counter) {
      w.entries.push_back({to.key, params.dtype(), Shape(to.shape), src});
      continue;
    }
    w.counters.push_back(std::make_unique<int64_t[]>(slot.count));
    to_counts(src, params.dtype(), slot.count, w.counters.back().get());
    w.entries.push_back({to.key, DType::i64, Shape(to.shape), w.counters.back().get()});
  }
  return w;
}

void save_weights(const ParamStore& params, const std::string& path,
                  const std::map<std::string, std::string>& metadata, const ExternalNames& names,
                  const WholeParts& wholes) {
  checkpoint_file::with_host_bytes(params, nullptr, wholes,
                                   [&](const checkpoint_file::StateBytes& bytes) {
                                     save_weights(params, path, metadata, names, bytes);
                                   });
}

void save_weights(const ParamStore& layout, const std::string& path,
                  const std::map<std::string, std::string>& metadata, const ExternalNames& names,
                  const checkpoint_file::StateBytes& bytes) {
  const std::vector<ParamSlot>& slots = layout.slots();
  std::vector<SafetensorsEntry> entries;
  std::vector<bool> counters;
  for (const ParamSlot& slot : slots) {
    const FileTensor to = file_tensor(slot, names);
    entries.push_back({to.key, to.counter ? DType::i64 : layout.dtype(), Shape(to.shape)});
    counters.push_back(to.counter);
  }
  SafetensorsWriter out(path, entries, metadata);
  std::vector<int64_t> counter;  // an int64 copy of a counter
  for (size_t s : out.order()) {
    const void* values = bytes({"", s});
    if (!counters[s]) {
      out.write_next(values);
      continue;
    }
    counter.resize(static_cast<size_t>(entries[s].shape.numel()));
    to_counts(values, layout.dtype(), counter.size(), counter.data());
    out.write_next(counter.data());
  }
  out.commit();
}

}  // namespace crest
