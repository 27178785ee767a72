// crest::rng: SplitMix64 as a counter-based generator (synthetic data, dummy data, shuffles).
#include "crest/core/hash_rng.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>

namespace crest {
namespace {

TEST(HashRng, SplitMix64ReferenceSequence) {
  // The first outputs of Vigna's splitmix64.c seeded with 1234567: state += gamma, then mix.
  constexpr uint64_t kExpected[] = {6457827717110365317ull, 3203168211198807973ull,
                                    9817491932198370423ull, 4593380528125082431ull,
                                    16408922859458223821ull};
  uint64_t state = 1234567;
  for (uint64_t want : kExpected) {
    EXPECT_EQ(rng::splitmix64(state), want);
    state += rng::kGoldenGamma;
  }
  // The counter form is the same sequence: draw c of key k is the (c+1)-th output from state k.
  for (uint64_t c = 0; c < 5; ++c) EXPECT_EQ(rng::counter_bits(1234567, c), kExpected[c]);
  static_assert(rng::splitmix64_mix(0) == 0);  // a bijection that fixes zero
}

TEST(HashRng, UnitDoublesStayInRange) {
  EXPECT_EQ(rng::unit_double(0), 0.0);
  EXPECT_EQ(rng::unit_double(~0ull), 1.0 - 0x1.0p-53);
  EXPECT_GT(rng::unit_double_open(0), 0.0);
  EXPECT_EQ(rng::unit_double_open(~0ull), 1.0);  // 1 - 2^-54 rounds up: (0, 1], never 0
  EXPECT_EQ(rng::unit_double_open(0), 0x1.0p-54);
  // Every value is a multiple of 2^-53 and the draws spread over [0, 1).
  std::set<int> deciles;
  double sum = 0;
  for (uint64_t c = 0; c < 10000; ++c) {
    const double u = rng::unit_double(rng::counter_bits(99, c));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    EXPECT_EQ(std::ldexp(u, 53), std::floor(std::ldexp(u, 53)));
    deciles.insert(static_cast<int>(u * 10));
    sum += u;
  }
  EXPECT_EQ(deciles.size(), 10u);
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

}  // namespace
}  // namespace crest
