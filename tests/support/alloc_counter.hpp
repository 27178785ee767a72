// Counts heap allocations made while a AllocationCounter is alive (global operator new is
// replaced in alloc_counter.cpp for the whole test binary; counting is off otherwise).
#pragma once
#include <cstddef>

namespace crest::test {

struct AllocationStats {
  size_t count = 0;
  size_t bytes = 0;
  size_t largest = 0;
};

class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationStats stats() const;
};

}  // namespace crest::test
