// torch's CPU `torch.randperm(n, generator=g)` after `g.manual_seed(seed)`, so that crest can
// draw the permutations a PyTorch DistributedSampler draws. torch's CPU generator is MT19937
// seeded with the seed's low 32 bits by the standard init_genrand (std::mt19937), and randperm
// has two algorithms chosen by n:
//  - n < kTorchRandpermInsideOutFrom: the identity, then for i = 0 .. n-2 position i swapped
//    with position i + (32-bit draw mod (n - i));
//  - from there on: the "inside-out" Fisher-Yates, i = 0 .. n-1, z = 64-bit draw mod (i + 1)
//    (two 32-bit draws, the first the high half), p[i] = p[z], p[z] = i.
// torch 1.13 and 2.x draw the same permutations (docs/data.md says how this was checked).
#pragma once
#include <cstdint>
#include <vector>

namespace crest {

// uint32 max / 20, torch's bound for its first algorithm (it keeps the modulo's bias small).
inline constexpr int64_t kTorchRandpermInsideOutFrom = 0xFFFFFFFFll / 20;

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

}  // namespace crest
