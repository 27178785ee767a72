#include "crest/core/byte_range.hpp"

#include <algorithm>

namespace crest {

std::vector<ByteRange> merge_ranges(std::vector<ByteRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> merged;
  for (const ByteRange& r : ranges) {
    if (r.bytes == 0) continue;
    if (!merged.empty() && r.offset <= merged.back().end()) {
      merged.back().bytes = std::max(merged.back().end(), r.end()) - merged.back().offset;
      continue;
    }
    merged.push_back(r);
  }
  return merged;
}

uint64_t range_bytes(const std::vector<ByteRange>& ranges) {
  uint64_t total = 0;
  for (const ByteRange& r : ranges) total += r.bytes;
  return total;
}

}  // namespace crest
