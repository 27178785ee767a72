#include "crest/optim/layer_adaptation.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest {
namespace {

bool matches(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

// "conv1.weight, conv1.bias, ... (22 in all)": enough to see how the names are spelled.
std::string some_names(const ParamStore& params) {
  std::string out;
  size_t shown = 0, trainable = 0;
  for (const ParamSlot& s : params.slots()) {
    if (!s.spec.trainable) continue;
    if (++trainable <= 6) out += (shown++ ? ", " : "") + s.name;
  }
  if (trainable > shown) out += ", ... (" + std::to_string(trainable) + " in all)";
  return out;
}

}  // namespace

std::vector<std::string> default_lars_exclusions() { return {"*.bias", "*.bn.weight"}; }

LarsExclusions lars_exclusions_given(const std::optional<std::vector<std::string>>& patterns) {
  if (!patterns) return {};
  return {.patterns = *patterns, .every_pattern_matches = true};
}

LarsExclusions weight_decay_exclusions_given(
    const std::optional<std::vector<std::string>>& patterns) {
  const std::string key = "weight_decay_exclude";
  if (!patterns) return {.patterns = {}, .one_dimensional = true, .key = key};
  return {.patterns = *patterns, .every_pattern_matches = true, .key = key};
}

void check_trust_settings(const std::string& who, double trust_coefficient, double eps,
                          double weight_decay) {
  if (!(trust_coefficient > 0))
    throw_usage(who + ": trust_coefficient must be positive, got " +
                std::to_string(trust_coefficient));
  if (!(eps >= 0)) throw_usage(who + ": eps must not be negative, got " + std::to_string(eps));
  if (!(weight_decay >= 0))
    throw_usage(who + ": weight_decay must not be negative, got " + std::to_string(weight_decay));
}

AdaptedTensors::AdaptedTensors(const ParamStore& params, const LarsExclusions& exclusions)
    : memory_(&params.memory()) {
  std::vector<bool> used(exclusions.patterns.size(), false);
  const size_t element = dtype_size(params.dtype());
  for (size_t s = 0; s < params.slots().size(); ++s) {
    const ParamSlot& slot = params.slots()[s];
    if (!slot.spec.trainable) continue;
    bool excluded = exclusions.one_dimensional && slot.shape.rank() <= 1;
    for (size_t p = 0; p < exclusions.patterns.size(); ++p)
      if (matches(exclusions.patterns[p], slot.name)) {
        used[p] = true;
        excluded = true;
      }
    if (excluded) {
      excluded_.push_back(s);
    } else {
      adapted_.push_back(s);
      ranges_.push_back({slot.offset / element, slot.count});
      shards_.push_back(slot.spec.shard.get());
      divided_ = divided_ || slot.spec.shard != nullptr;
    }
  }
  if (exclusions.every_pattern_matches)
    for (size_t p = 0; p < used.size(); ++p)
      if (!used[p])
        throw_usage("optimizer." + exclusions.key + ": pattern '" + exclusions.patterns[p] +
                    "' matches no trainable parameter of this model (a typo? its parameters: " +
                    some_names(params) + ")");
  sums_ = Buffer(std::max<size_t>(2 * adapted_.size(), 1) * sizeof(double), 256, params.memory());
  params.memory().memset(sums_.data(), 0, sums_.bytes());
}

std::string AdaptedTensors::describe(const ParamStore& params) const {
  std::string out = "trust ratio on " + std::to_string(adapted_.size()) + " tensors; " +
                    std::to_string(excluded_.size()) + " left alone";
  for (size_t i = 0; i < excluded_.size() && i < 8; ++i)
    out += (i ? ", " : ": ") + params.slots()[excluded_[i]].name;
  if (excluded_.size() > 8) out += ", ...";
  return out;
}

void AdaptedTensors::measure(VectorOps& vec, const void* w, const void* g) {
  if (adapted_.empty()) return;
  auto* sums = static_cast<double*>(sums_.data());
  vec.range_sum_squares_into(w, g, ranges_.data(), ranges_.size(), sums);
  if (!divided_) return;
  // A divided parameter's norms are its whole tensor's: the parts' sums over the group, which
  // the communicator adds in host memory (on a device: one copy each way).
  const size_t n = adapted_.size();
  HostStaging host(*memory_, sums, 2 * n * sizeof(double));
  auto* squares = host.as<double>();
  for (size_t i = 0; i < n; ++i)
    if (shards_[i]) {
      double pair[2] = {squares[i], squares[n + i]};
      shards_[i]->sum_over_group(pair, 2);
      squares[i] = pair[0];
      squares[n + i] = pair[1];
    }
  host.commit();
}

VectorOps::TrustRatioAt AdaptedTensors::ratio_at(size_t i, double coefficient, double weight_decay,
                                                 double eps) const {
  CREST_CHECK(i < adapted_.size(), "a trust ratio of no adapted tensor");
  const auto* sums = static_cast<const double*>(sums_.data());
  return {sums + i, sums + adapted_.size() + i, coefficient, weight_decay, eps};
}

std::vector<double> AdaptedTensors::squares() const {
  const size_t n = adapted_.size();
  if (n == 0) return {};
  const HostStaging host(*memory_, static_cast<const void*>(sums_.data()), 2 * n * sizeof(double));
  return {host.as<const double>(), host.as<const double>() + 2 * n};
}

}  // namespace crest
