#include "crest/data/torch_randperm.hpp"

#include <numeric>
#include <random>
#include <utility>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// torch seeds its MT19937 with the seed's low 32 bits (init_with_uint32).
std::mt19937 torch_generator(uint64_t seed) {
  return std::mt19937(static_cast<std::mt19937::result_type>(seed & 0xFFFFFFFFu));
}

void swap_forward(std::vector<int64_t>& p, std::mt19937& mt) {
  const auto n = static_cast<int64_t>(p.size());
  std::iota(p.begin(), p.end(), int64_t{0});
  for (int64_t i = 0; i < n - 1; ++i) {
    const int64_t z =
        static_cast<int64_t>(static_cast<uint32_t>(mt()) % static_cast<uint64_t>(n - i));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(i + z)]);
  }
}

void inside_out(std::vector<int64_t>& p, std::mt19937& mt) {
  const auto n = static_cast<int64_t>(p.size());
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t high = static_cast<uint32_t>(mt()), low = static_cast<uint32_t>(mt());
    const auto z = static_cast<size_t>(((high << 32) | low) % static_cast<uint64_t>(i + 1));
    p[static_cast<size_t>(i)] = p[z];
    p[z] = i;
  }
}

}  // namespace

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  if (n < 0) throw_usage("torch_randperm: n must not be negative, got " + std::to_string(n));
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::mt19937 mt = torch_generator(seed);
  if (n < kTorchRandpermInsideOutFrom)
    swap_forward(p, mt);
  else
    inside_out(p, mt);
  return p;
}

}  // namespace crest
