#include "crest/train/trained_weights.hpp"

#include <cstring>
#include <filesystem>
#include <set>

#include "checkpoint_format.hpp"
#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/train/checkpoint.hpp"

namespace crest {
namespace fs = std::filesystem;

namespace {

constexpr const char* kModelPrefix = "model/";

// Checks one checkpoint tensor against the slot it loads into, before anything is loaded.
void check_model_tensor(const SafetensorsFile& file, const ParamSlot& slot) {
  const std::string key = kModelPrefix + slot.name;
  const SafetensorsTensor* t = file.find(key);
  if (!t)
    throw_input(file.path() + ": checkpoint lacks '" + key + "' " + slot.shape.str() +
                " (was it written for another model or other model settings?)");
  if (t->dtype != SafetensorsDType::F32 && t->dtype != SafetensorsDType::F64)
    throw_input(file.path() + ": checkpoint tensor '" + key + "' has dtype " +
                safetensors_dtype_name(t->dtype) + " (expected F32 or F64)");
  if (t->shape != slot.shape.to_vector())
    throw_input(file.path() + ": checkpoint tensor '" + key + "' is " + t->crest_shape().str() +
                ", this model needs " + slot.shape.str());
}

// Element i of an F32 or F64 tensor, copied: the mapping gives no alignment guarantee.
double element(const SafetensorsTensor& t, size_t i) {
  if (t.dtype == SafetensorsDType::F32) {
    float f;
    std::memcpy(&f, t.data + i * 4, 4);
    return f;
  }
  double d;
  std::memcpy(&d, t.data + i * 8, 8);
  return d;
}

}  // namespace

std::string resolve_checkpoint(const std::string& checkpoint) {
  std::error_code ec;
  if (!fs::is_directory(checkpoint, ec)) {
    if (!fs::exists(checkpoint, ec)) throw_input(checkpoint + ": no such checkpoint file");
    return checkpoint;
  }
  const std::string dir = (fs::path(checkpoint) / "checkpoints").string();
  const auto found = list_checkpoints(dir);
  if (found.empty())
    throw_input(checkpoint + ": no checkpoint under " + dir +
                " (--checkpoint takes a run's output_dir or a checkpoint file)");
  return found.back();
}

void load_checkpoint_weights(ParamStore& params, const std::string& path) {
  const SafetensorsFile file = checkpoint_format::open_verified(path);
  std::set<std::string> expected;
  for (const ParamSlot& slot : params.slots()) {
    check_model_tensor(file, slot);
    expected.insert(kModelPrefix + slot.name);
  }
  for (const auto& t : file.tensors())
    if (t.name.starts_with(kModelPrefix) && !expected.count(t.name))
      throw_input(path + ": checkpoint tensor '" + t.name + "' is not a parameter of this model");
  HostStaging host(params.memory(), params.values(), params.bytes());
  for (const ParamSlot& slot : params.slots()) {
    const SafetensorsTensor& t = file.at(kModelPrefix + slot.name);
    char* dst = host.as<char>() + slot.offset;
    for (size_t i = 0; i < slot.count; ++i) {
      const double v = element(t, i);
      if (params.dtype() == DType::f32)
        reinterpret_cast<float*>(dst)[i] = static_cast<float>(v);
      else
        reinterpret_cast<double*>(dst)[i] = v;
    }
  }
  host.commit();
}

void load_trained_weights(ParamStore& params, const ExternalNames& names,
                          const std::string& checkpoint, const std::string& weights) {
  if (checkpoint.empty() == weights.empty())
    throw_usage(
        "give the trained weights as exactly one of --checkpoint DIR_OR_FILE and "
        "--weights FILE");
  if (!weights.empty())
    load_weights(params, weights, names);
  else
    load_checkpoint_weights(params, resolve_checkpoint(checkpoint));
}

}  // namespace crest
