// Divided parameters (ParamSpec::shard: the dense head of a spatially split run) in files: a
// checkpoint or a weight file holds the whole tensor, as an unsplit run writes it, so training
// resumes and weights load under any decomposition.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crest/graph/param_store.hpp"

namespace crest {

class Optimizer;

// A slot's shape in files: the whole parameter's.
Shape file_shape(const ParamSlot& slot);

// The whole tensors of the divided parameters, gathered onto the job's rank 0 before it writes:
// the values and, with an optimizer, each of its state buffers. Collective over every rank (each
// spatial group gathers onto its first rank; the other ranks hold nothing).
class WholeParts {
 public:
  WholeParts() = default;  // nothing gathered: for a store with nothing divided
  WholeParts(const ParamStore& params, Optimizer* optimizer);
  // Slot `slot`'s whole tensor in the values (state "") or in optimizer state `state`; null when
  // the slot is not divided or this rank holds none.
  const std::byte* find(size_t slot, const std::string& state = "") const;
  void add(size_t slot, const std::string& state, std::vector<std::byte> whole);

 private:
  std::map<std::pair<size_t, std::string>, std::vector<std::byte>> wholes_;
};

// Reading whole tensors into divided slots: a whole-sized buffer to read into for each, and its
// part taken into the slot's place when done.
class PartsFromWhole {
 public:
  // The buffer to read slot `s`'s whole tensor (values: state "") into, which take() later cuts
  // into `part` (host).
  void* whole_for(const ParamStore& params, size_t s, const std::string& state, void* part);
  // Cuts every whole tensor into its part; with `keep`, hands the whole tensors to it.
  void take(WholeParts* keep = nullptr);

 private:
  struct Pending {
    const ParamSlot* slot;
    size_t index;
    std::string state;
    DType dtype;
    void* part;
    std::vector<std::byte> whole;
  };
  std::vector<Pending> pending_;
};

// Collective over every rank: each divided slot's part (values and, with an optimizer, each state
// buffer) from the whole tensor its group's first rank holds in `wholes` (a checkpoint the job's
// rank 0 read); groups whose first rank holds none keep theirs.
void scatter_parts(const ParamStore& params, Optimizer* optimizer, const WholeParts& wholes);

}  // namespace crest
