// CREST_WIDEST_VECTORS: compile a function for AVX-512, AVX2 and the x86-64 baseline, and let the
// loader pick the widest the CPU has. crest's own code is compiled for the baseline (CREST_NATIVE
// is off by default, so one binary runs on every node); the few loops that stream large tensors
// are worth more. GCC clones the function per listed target and resolves the call once, at load
// time (an ifunc); an OpenMP region's outlined body inherits the clone's target. Other compilers
// get the baseline loop. Results are the same from every clone where each element is computed on
// its own or reductions keep their order (CMakeLists.txt turns off FMA contraction).
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CREST_WIDEST_VECTORS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CREST_WIDEST_VECTORS
#endif
