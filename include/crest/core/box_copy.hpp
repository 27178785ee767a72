// Copying (or adding) a box of one dense row-major array into a box of another: the halo rows
// packed into a message, a message unpacked into a window, a block of a sample read from a file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crest/core/dtype.hpp"

namespace crest {

// An array's extents, and a box in it: its first index per dim (the box's size is the transfer's
// `count`).
struct BoxAt {
  const std::vector<int64_t>& dims;
  std::vector<int64_t> start;
};

enum class BoxOp { copy, add, zero };

// dst's box (op)= src's box, both of extents `count`. `add` supports float32 and float64; `zero`
// sets dst's box to zero bytes and reads nothing of src (which may be null).
void box_transfer(const void* src, const BoxAt& from, void* dst, const BoxAt& to,
                  const std::vector<int64_t>& count, DType dtype, BoxOp op);

}  // namespace crest
