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

}  // namespace crest
