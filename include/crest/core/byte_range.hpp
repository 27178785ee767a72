// Ranges of a file's bytes: what a reader needs of a file, or what a staging copies of it (a
// spatial split's blocks of an npy array: docs/data.md, "Staging").
#pragma once
#include <cstdint>
#include <vector>

namespace crest {

struct ByteRange {
  uint64_t offset = 0, bytes = 0;
  uint64_t end() const { return offset + bytes; }
  bool operator==(const ByteRange&) const = default;
};

// The same bytes as sorted, disjoint ranges, touching ones joined, empty ones dropped.
std::vector<ByteRange> merge_ranges(std::vector<ByteRange> ranges);

// The bytes the ranges hold.
uint64_t range_bytes(const std::vector<ByteRange>& ranges);

// Where rows [begin[a], end[a]) of the first begin.size() axes of a C-order array of `shape`
// (the other axes whole), `item` bytes per element, lie in a file whose array starts at byte
// `data_offset`: one range per contiguous run (each spanning the innermost axis the block cuts
// and the whole axes after it), in file order. A block read's reads (npy), and what a staging
// keeps of a file (npy, HDF5).
std::vector<ByteRange> c_order_block_ranges(const std::vector<int64_t>& shape, uint64_t item,
                                            uint64_t data_offset, const std::vector<int64_t>& begin,
                                            const std::vector<int64_t>& end);

}  // namespace crest
