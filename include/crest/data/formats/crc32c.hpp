// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of TFRecord framing.
//
// crc32c() uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time),
// three independent streams interleaved to hide its latency, and a portable slicing-by-8 table
// otherwise. Both give identical results. The value is the standard one (initial and final
// inversion are applied inside), and it extends: crc32c(b, nb, crc32c(a, na)) is the CRC of a
// followed by b.
#pragma once
#include <cstddef>
#include <cstdint>

namespace crest {

uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// The portable implementation, exposed so tests can compare it with the hardware path.
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);
// True when crc32c() runs on the SSE4.2 instruction.
bool crc32c_uses_hardware();

// TFRecord stores CRCs masked, because a CRC of data that itself contains CRCs is weak:
// mask(c) = ((c >> 15) | (c << 17)) + 0xA282EAD8 (mod 2^32).
constexpr uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }
constexpr uint32_t crc32c_unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xA282EAD8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace crest
