// A parameter whose elements are divided among the ranks of a group, each rank holding only its
// part (docs/distributed.md, "The dense head"): the weight of a dense layer that reads a
// spatially split, flattened activation, where each rank keeps the columns of its block's
// features. The part is a matrix [rows, part columns] taken from the whole [rows, columns]
// parameter; which whole columns, in which order, is the implementation's (the spatial part,
// crest/spatial/sharded_dense.hpp).
//
// Everything that needs the whole parameter goes through this interface: initialisation (the
// whole tensor drawn as an unsplit run draws it, then the part taken), checkpoints and weight
// files (the parts gathered, the whole written; on load each rank takes its part), norms (the
// parts' sums of squares added over the group), and gradient averaging (over the ranks that hold
// the same part: the data-parallel replicas, never the group).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crest/core/shape.hpp"
#include "crest/core/tensor.hpp"

namespace crest {

class Communicator;  // crest/dist/communicator.hpp

class ParamShard {
 public:
  virtual ~ParamShard() = default;
  // The whole parameter's shape, and this rank's part's.
  virtual Shape whole_shape() const = 0;
  virtual Shape part_shape() const = 0;
  // Elements every rank reserves for its part: the largest part of the group, so that the flat
  // parameter buffers have the same layout on every rank.
  virtual int64_t reserved_count() const = 0;
  // This rank's part of `whole` (host memory, whole_shape() elements of `dtype`) into `part`.
  virtual void take_part(const void* whole, void* part, DType dtype) const = 0;
  // Collective over the group: every rank's part (host memory) gathered into the whole tensor
  // (whole_shape() elements) on the group's first rank, and returned there; elsewhere an empty
  // vector. The first rank of the job's first group is the job's rank 0.
  virtual std::vector<std::byte> gather(const void* part, DType dtype) const = 0;
  // Collective over the group: the group's first rank's `whole` (host memory; ignored elsewhere)
  // cut into every rank's `part` (host memory). Where the first rank passes null the group's
  // parts stay as they are (only the job's rank 0 reads a checkpoint).
  virtual void scatter(const void* whole, void* part, DType dtype) const = 0;
  // Collective over the group: n doubles summed over it (sums of squares of the parts).
  virtual void sum_over_group(double* values, size_t n) const = 0;
  // The ranks that hold the same part (one per data-parallel replica): its gradient is averaged
  // over them. Null or of size 1: there is nothing to average.
  virtual Communicator* replicas() const = 0;
};

}  // namespace crest
