// The host memory resource: large blocks start on a 2 MB boundary (where transparent huge pages
// can back them), come zeroed and are writable to their last byte; small ones keep the asked
// alignment.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <string>

#include "crest/core/error.hpp"
#include "crest/core/memory_resource.hpp"
#include "crest/core/tensor.hpp"

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

// Memory that has no room: the device's error (crest::Error), or the host's (std::bad_alloc).
class FullMemory final : public MemoryResource {
 public:
  explicit FullMemory(bool device) : device_(device) {}
  void* allocate(size_t bytes, size_t /*alignment*/) override {
    if (!device_) throw std::bad_alloc();
    throw_input("cuda memory: cannot allocate " + std::to_string(bytes) + " bytes on device 0");
  }
  void deallocate(void* /*p*/, size_t /*bytes*/) override {}
  void copy_to_device(void*, const void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override {}
  void copy(void*, const void*, size_t) override {}
  void memset(void*, int, size_t) override {}
  bool is_host() const override { return !device_; }

 private:
  bool device_;
};

// Which part of the model did not fit, and its size, before the memory's own reason.
TEST(NamedBuffer, AnAllocationThatFailsNamesWhatItWasFor) {
  for (const bool device : {true, false}) {
    FullMemory full(device);
    try {
      named_buffer("the model's parameters", 3 << 20, full);
      FAIL() << "allocated from full memory";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      const std::string want = std::string("the model's parameters (3.0 MiB): ") +
                               (device ? "cuda memory: cannot allocate 3145728 bytes on device 0"
                                       : "out of host memory");
      EXPECT_EQ(e.what(), want);
    }
  }
  const Buffer fine = named_buffer("a buffer", 64, host_memory());
  EXPECT_EQ(fine.bytes(), 64u);
}

}  // namespace
}  // namespace crest
