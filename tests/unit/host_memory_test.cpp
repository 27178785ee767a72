// The host memory resource: large blocks start on a 2 MB boundary (where transparent huge pages
// can back them), come zeroed and are writable to their last byte; small ones keep the asked
// alignment.
#include <gtest/gtest.h>

#include <cstdint>

#include "crest/core/memory_resource.hpp"

namespace crest {
namespace {

TEST(HostMemory, LargeBlocksStartOnA2MBBoundaryZeroedAndWhole) {
  MemoryResource& m = host_memory();
  for (size_t bytes : {size_t{1} << 20, (size_t{3} << 20) + 123, size_t{5} << 21}) {
    auto* p = static_cast<unsigned char*>(m.allocate(bytes, 64));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u) << bytes;
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i += 4096) nonzero += p[i] != 0;
    EXPECT_EQ(nonzero + (p[bytes - 1] != 0), 0u) << bytes;
    p[0] = 1;
    p[bytes - 1] = 2;  // the last byte is inside the mapping
    EXPECT_EQ(p[bytes - 1], 2);
    m.deallocate(p, bytes);
  }
}

TEST(HostMemory, SmallBlocksKeepTheirAlignment) {
  MemoryResource& m = host_memory();
  void* p = m.allocate(1000, 256);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  m.deallocate(p, 1000);
}

}  // namespace
}  // namespace crest
