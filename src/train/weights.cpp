#include "crest/train/weights.hpp"

#include <cstring>
#include <set>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/data/safetensors.hpp"

namespace crest {

void load_weights(ParamStore& params, const std::string& path) {
  SafetensorsFile file(path);
  std::set<std::string> expected;
  // Validate everything before writing anything, so a bad file leaves the model untouched.
  for (const auto& slot : params.slots()) {
    expected.insert(slot.name);
    const SafetensorsTensor* t = file.find(slot.name);
    if (!t) throw_input(path + ": missing parameter '" + slot.name + "' " + slot.shape.str());
    if (t->dtype != SafetensorsDType::F32 && t->dtype != SafetensorsDType::F64)
      throw_input(path + ": parameter '" + slot.name + "' has dtype " +
                  safetensors_dtype_name(t->dtype) + " (expected F32 or F64)");
    if (t->shape != slot.shape.to_vector())
      throw_input(path + ": parameter '" + slot.name + "' has shape " + t->crest_shape().str() +
                  ", the model expects " + slot.shape.str());
  }
  for (const auto& t : file.tensors())
    if (!expected.count(t.name))
      throw_input(path + ": tensor '" + t.name + "' is not a parameter of this model");
  // Fetched first: the padding between slots keeps its zeros.
  HostStaging host(params.memory(), params.values(), params.bytes());
  for (const ParamSlot& slot : params.slots()) {
    const SafetensorsTensor& t = file.at(slot.name);
    char* dst = host.as<char>() + slot.offset;
    // Element-wise copy with memcpy per value: the mapping gives no alignment guarantee.
    const size_t in_size = t.dtype == SafetensorsDType::F32 ? 4 : 8;
    for (size_t i = 0; i < slot.count; ++i) {
      double v;
      if (in_size == 4) {
        float f;
        std::memcpy(&f, t.data + i * 4, 4);
        v = f;
      } else {
        std::memcpy(&v, t.data + i * 8, 8);
      }
      if (params.dtype() == DType::f32)
        reinterpret_cast<float*>(dst)[i] = static_cast<float>(v);
      else
        reinterpret_cast<double*>(dst)[i] = v;
    }
  }
  host.commit();
}

void save_weights(const ParamStore& params, const std::string& path,
                  const std::map<std::string, std::string>& metadata) {
  const HostStaging host(params.memory(), static_cast<const void*>(params.values()),
                         params.bytes());
  std::vector<SafetensorsEntry> entries;
  for (const ParamSlot& slot : params.slots())
    entries.push_back({slot.name, params.dtype(), slot.shape, host.as<char>() + slot.offset});
  write_safetensors(path, entries, metadata);
}

}  // namespace crest
