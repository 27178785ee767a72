// CRC-32C: golden value, extension, the hardware path against the portable table, masking.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crest/data/formats/crc32c.hpp"

namespace crest {
namespace {

TEST(Crc32cTest, GoldenValues) {
  const char* digits = "123456789";
  EXPECT_EQ(crc32c(digits, 9), 0xE3069283u);  // SPEC.md §3
  EXPECT_EQ(crc32c_portable(digits, 9), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), inc(32);
  for (size_t i = 0; i < 32; ++i) inc[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), 32), 0x46DD794Eu);
}

TEST(Crc32cTest, ExtendsAcrossSplits) {
  std::mt19937 gen(7);
  std::vector<unsigned char> buf(100000);
  for (auto& b : buf) b = static_cast<unsigned char>(gen());
  const uint32_t whole = crc32c(buf.data(), buf.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{49153}, buf.size()}) {
    const uint32_t a = crc32c(buf.data(), split);
    EXPECT_EQ(crc32c(buf.data() + split, buf.size() - split, a), whole) << split;
    EXPECT_EQ(crc32c_portable(buf.data() + split, buf.size() - split, a), whole) << split;
  }
}

// The hardware path runs three interleaved streams on 3x8 KiB and 3x256-byte blocks and joins
// them with precomputed shift tables; sizes and offsets below hit every branch and boundary.
TEST(Crc32cTest, HardwareMatchesPortableOnOddSizesAndAlignments) {
  std::mt19937 gen(11);
  std::vector<unsigned char> buf(3 * 8192 * 2 + 3 * 256 * 3 + 64);
  for (auto& b : buf) b = static_cast<unsigned char>(gen());
  std::vector<size_t> sizes = {0,
                               1,
                               7,
                               8,
                               9,
                               255,
                               256,
                               767,
                               768,
                               769,
                               3 * 256 + 8,
                               3 * 8192 - 1,
                               3 * 8192,
                               3 * 8192 + 1,
                               3 * 8192 + 3 * 256 + 13};
  std::uniform_int_distribution<size_t> any_size(0, buf.size() - 16);
  for (int i = 0; i < 200; ++i) sizes.push_back(any_size(gen));
  for (size_t n : sizes)
    for (size_t offset = 0; offset < 9; ++offset) {
      if (offset + n > buf.size()) continue;
      const uint32_t seed = static_cast<uint32_t>(n * 31 + offset);
      ASSERT_EQ(crc32c(buf.data() + offset, n, seed), crc32c_portable(buf.data() + offset, n, seed))
          << "n=" << n << " offset=" << offset;
    }
  if (!crc32c_uses_hardware()) GTEST_SKIP() << "no SSE4.2 on this CPU: only the table path ran";
}

TEST(Crc32cTest, MaskRoundTripsAndMatchesTheTfRecordDefinition) {
  std::mt19937 gen(3);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t c = static_cast<uint32_t>(gen());
    EXPECT_EQ(crc32c_unmask(crc32c_mask(c)), c);
    EXPECT_EQ(crc32c_mask(c), static_cast<uint32_t>(((c >> 15) | (c << 17)) + 0xA282EAD8u));
  }
  // SPEC.md §3: the length CRC of a 17-byte record is stored masked as 9d6db52e (LE bytes).
  const unsigned char length[8] = {0x11, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(crc32c_mask(crc32c(length, 8)), 0x2eb56d9du);
}

}  // namespace
}  // namespace crest
