#include "crest/data/formats/crc32c.hpp"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace crest {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reflected

using ByteTable = std::array<uint32_t, 256>;

// Slicing-by-8: table[k][b] is the CRC register after byte b followed by k zero bytes, so eight
// input bytes are folded with eight independent look-ups instead of a serial chain of eight.
struct SlicingTables {
  std::array<ByteTable, 8> t{};
  SlicingTables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
};

const SlicingTables& slicing_tables() {
  static const SlicingTables tables;
  return tables;
}

uint64_t load_le64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Works on the raw register (no inversion).
uint32_t portable_update(uint32_t crc, const unsigned char* p, size_t n) {
  const auto& t = slicing_tables().t;
  while (n >= 8) {
    const uint64_t v = load_le64(p) ^ crc;
    crc = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
          t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)

// The crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so one
// dependency chain runs at a third of the possible speed. We run three chains over three
// adjacent blocks and join them: crc(A||B) = shift(crc(A), |B|) ^ crc(B), where shift
// multiplies the register by x^(8|B|) mod P. For a fixed |B| that operator is linear in the 32
// register bits, so it is precomputed into four byte tables (the approach of Mark Adler's
// crc32c.c).
constexpr size_t kLongBlock = 8192;
constexpr size_t kShortBlock = 256;

using Gf2Matrix = std::array<uint32_t, 32>;  // column k = image of bit k

uint32_t gf2_times(const Gf2Matrix& m, uint32_t v) {
  uint32_t sum = 0;
  for (size_t k = 0; v; ++k, v >>= 1)
    if (v & 1) sum ^= m[k];
  return sum;
}

Gf2Matrix gf2_square(const Gf2Matrix& m) {
  Gf2Matrix out{};
  for (size_t k = 0; k < 32; ++k) out[k] = gf2_times(m, m[k]);
  return out;
}

// Tables that advance a raw register over `bytes` zero bytes (bytes a power of two).
struct ShiftTables {
  std::array<ByteTable, 4> t{};
  explicit ShiftTables(size_t bytes) {
    Gf2Matrix op{};  // one zero bit
    op[0] = kPoly;
    for (size_t k = 1; k < 32; ++k) op[k] = 1u << (k - 1);
    for (size_t bits = 1; bits < 8 * bytes; bits *= 2) op = gf2_square(op);
    for (uint32_t b = 0; b < 256; ++b)
      for (size_t k = 0; k < 4; ++k) t[k][b] = gf2_times(op, b << (8 * k));
  }
  uint32_t shift(uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

const ShiftTables& long_shift() {
  static const ShiftTables tables(kLongBlock);
  return tables;
}
const ShiftTables& short_shift() {
  static const ShiftTables tables(kShortBlock);
  return tables;
}

// Three chains over three adjacent blocks of `block` bytes while at least three are left. A
// function of its own, not a lambda: a lambda does not inherit its caller's target("sse4.2"), and
// without -march=native (CREST_NATIVE is off by default) the intrinsic would not compile in it.
__attribute__((target("sse4.2"))) void three_way(uint64_t& crc, const unsigned char*& p, size_t& n,
                                                 size_t block, const ShiftTables& tables) {
  while (n >= 3 * block) {
    uint64_t crc1 = 0, crc2 = 0;
    const unsigned char* end = p + block;
    do {
      crc = _mm_crc32_u64(crc, load_le64(p));
      crc1 = _mm_crc32_u64(crc1, load_le64(p + block));
      crc2 = _mm_crc32_u64(crc2, load_le64(p + 2 * block));
      p += 8;
    } while (p < end);
    crc = tables.shift(static_cast<uint32_t>(crc)) ^ crc1;
    crc = tables.shift(static_cast<uint32_t>(crc)) ^ crc2;
    p += 2 * block;
    n -= 3 * block;
  }
}

__attribute__((target("sse4.2"))) uint32_t hardware_update(uint32_t crc32, const unsigned char* p,
                                                           size_t n) {
  uint64_t crc = crc32;
  // Up to seven bytes to reach an 8-byte boundary: aligned 64-bit loads are cheaper.
  while (n && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p++);
    --n;
  }
  three_way(crc, p, n, kLongBlock, long_shift());
  three_way(crc, p, n, kShortBlock, short_shift());
  while (n >= 8) {
    crc = _mm_crc32_u64(crc, load_le64(p));
    p += 8;
    n -= 8;
  }
  while (n--) crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p++);
  return static_cast<uint32_t>(crc);
}

bool cpu_has_sse42() { return __builtin_cpu_supports("sse4.2"); }

#else

uint32_t hardware_update(uint32_t crc, const unsigned char* p, size_t n) {
  return portable_update(crc, p, n);
}
bool cpu_has_sse42() { return false; }

#endif

using UpdateFn = uint32_t (*)(uint32_t, const unsigned char*, size_t);

UpdateFn select_update() {
  if (!cpu_has_sse42()) return portable_update;
#if defined(__x86_64__)
  // Build the shift tables now so the first call of a hot loop does not pay for them.
  (void)long_shift();
  (void)short_shift();
#endif
  return hardware_update;
}

UpdateFn update_fn() {
  static const UpdateFn fn = select_update();
  return fn;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  return ~update_fn()(~crc, static_cast<const unsigned char*>(data), n);
}

uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc) {
  return ~portable_update(~crc, static_cast<const unsigned char*>(data), n);
}

bool crc32c_uses_hardware() { return update_fn() != portable_update; }

}  // namespace crest
