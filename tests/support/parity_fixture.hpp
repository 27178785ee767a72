// Comparing crest's training of a large network with a PyTorch fixture that keeps only sampled
// outcomes (tests/fixtures/hashed_init.py's sampled_outcomes: per trained parameter the norm of
// its update and the update at hashed positions, per buffer its final norm and values there):
// parameters are addressed by the reference's state_dict key (BuiltModel::external_params).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crest/data/safetensors.hpp"
#include "crest/graph/param_store.hpp"
#include "crest/models/built_model.hpp"

namespace crest::test {

using ValuesByKey = std::map<std::string, std::vector<double>>;

// The reference key and shape of a parameter slot.
std::pair<std::string, std::vector<int64_t>> reference_name(const BuiltModel& m,
                                                            const ParamSlot& s);

// Every parameter's values (as doubles), by reference key.
ValuesByKey values_by_reference_key(const BuiltModel& m, const ParamStore& p);

// Every trained parameter's gradient (as doubles), by reference key.
ValuesByKey gradients_by_reference_key(const BuiltModel& m, const ParamStore& p);

// Per tensor of `exact`, the relative distance ||got - exact|| / ||exact||, sorted ascending;
// the worst one's key in `worst_key`.
std::vector<double> relative_errors(const ValuesByKey& got, const ValuesByKey& exact,
                                    std::string* worst_key);

// Sets every parameter to hashed_init::initial_value(seed, its reference key and shape).
void set_hashed_initial_values(const BuiltModel& m, ParamStore& p, uint64_t seed);

std::vector<double> read_f64(const SafetensorsFile& f, const std::string& name);
std::vector<int64_t> read_i64(const SafetensorsFile& f, const std::string& name);
double norm(const std::vector<double>& v);

// Expects every tensor's outcome (a trained parameter's update final - initial, a buffer's final
// value, a counter's value) to match the fixture within `relative` over its sampled positions
// and in its norm. Returns how many tensors (counters aside) it compared.
int expect_sampled_outcomes_match(const SafetensorsFile& fixture, const ValuesByKey& initial,
                                  const ValuesByKey& final_values, double relative);

}  // namespace crest::test
