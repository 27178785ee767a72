#include "crest/core/byte_range.hpp"

#include <algorithm>

#include "crest/core/error.hpp"

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

std::vector<ByteRange> c_order_block_ranges(const std::vector<int64_t>& shape, uint64_t item,
                                            uint64_t data_offset, const std::vector<int64_t>& begin,
                                            const std::vector<int64_t>& end) {
  CREST_CHECK(begin.size() == end.size() && begin.size() <= shape.size(),
              "a block of more axes than its array's");
  std::vector<int64_t> start(shape.size(), 0), count = shape;
  for (size_t a = 0; a < begin.size(); ++a) {
    CREST_CHECK(0 <= begin[a] && begin[a] <= end[a] && end[a] <= shape[a],
                "a block outside its array");
    start[a] = begin[a];
    count[a] = end[a] - begin[a];
  }
  size_t cut = 0;
  for (size_t a = 0; a < begin.size(); ++a)
    if (count[a] != shape[a]) cut = a;
  int64_t elements = count[cut];
  for (size_t a = cut + 1; a < shape.size(); ++a) elements *= shape[a];
  std::vector<int64_t> at(start.begin(), start.begin() + static_cast<int64_t>(cut));
  std::vector<ByteRange> ranges;
  for (;;) {
    int64_t offset = 0;  // elements before the run's first, in C order
    for (size_t a = 0; a < shape.size(); ++a)
      offset = offset * shape[a] + (a < cut ? at[a] : a == cut ? start[a] : 0);
    ranges.push_back({data_offset + static_cast<uint64_t>(offset) * item,
                      static_cast<uint64_t>(elements) * item});
    size_t a = cut;  // the next run: the outer axes' index, last fastest
    while (a > 0 && ++at[a - 1] == start[a - 1] + count[a - 1]) {
      at[a - 1] = start[a - 1];
      --a;
    }
    if (a == 0) return ranges;
  }
}

uint64_t range_bytes(const std::vector<ByteRange>& ranges) {
  uint64_t total = 0;
  for (const ByteRange& r : ranges) total += r.bytes;
  return total;
}

}  // namespace crest
