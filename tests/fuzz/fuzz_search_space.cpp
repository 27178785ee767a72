// Search-space files of `crest search` (docs/search.md): the input is the space's YAML text. It is
// parsed, checked against a fixed base config through the config loader (every parameter's
// extreme values as `key=value` overrides), and trials are drawn from it as a study would: a few
// random trials, a perturbation of one (PBT's explore step) and, for list-only spaces, the grid.
// Any crest::Error is the parser doing its job.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/search/pbt.hpp"
#include "crest/search/search_space.hpp"
#include "crest/search/space_check.hpp"
#include "fuzz_input_file.hpp"

namespace {

// A small CosmoFlow run: every section a space is likely to name exists, so the schema (not a
// missing section) decides whether a value is accepted.
constexpr char kBaseConfig[] = R"(output_dir: run
data:
  name: dummy
  n_train: 8
  n_valid: 4
  sample_shape: [8, 8, 8, 4]
  target_shape: [4]
  batch_size: 2
  n_epochs: 2
  seed: 0
model:
  name: cosmoflow
  input_shape: [8, 8, 8, 4]
  target_size: 4
  conv_size: 4
  fc1_size: 8
  fc2_size: 8
  dropout: 0.5
optimizer:
  name: SGD
  momentum: 0.9
lr_schedule:
  base_lr: 0.01
train:
  loss: mse
  metrics: ['mean_absolute_error']
)";

// Each probe value of the check is one config load; a space with hundreds of list values is
// valid but slow to check, and adds nothing the first few dozen do not.
constexpr size_t kMaxCheckedValues = 64;

const std::string& base_config_path() {
  static crest::fuzz::InputFile file;
  static const std::string& path =
      file.write(reinterpret_cast<const uint8_t*>(kBaseConfig), sizeof kBaseConfig - 1);
  return path;
}

size_t checked_values(const crest::SearchSpace& space) {
  size_t n = 0;
  for (const auto& p : space.parameters) n += p.values.empty() ? 2 : p.values.size();
  return n;
}

bool lists_only(const crest::SearchSpace& space) {
  for (const auto& p : space.parameters)
    if (p.kind != crest::SamplerKind::choice && p.kind != crest::SamplerKind::grid) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  crest::SearchSpace space;
  try {
    space = crest::parse_search_space(text, "space.yaml");
  } catch (const crest::Error&) {
    return 0;
  }
  for (uint64_t i = 0; i < 4; ++i) {
    const crest::Assignment trial = crest::sample_trial(space, 1, i);
    (void)crest::perturb(space, trial, crest::PbtSettings{}, 1, i);
    (void)crest::as_overrides(trial);
  }
  (void)crest::pbt_refused_key(space);
  try {
    if (lists_only(space)) (void)crest::grid_trials(space);
  } catch (const crest::Error&) {
  }
  if (checked_values(space) <= kMaxCheckedValues) {
    try {
      crest::check_space_against_config(space, base_config_path(), {});
    } catch (const crest::Error&) {
    }
  }
  return 0;
}
