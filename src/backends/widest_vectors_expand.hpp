// Included (no include guard, on purpose) after `#define CREST_WIDEST_VECTORS_LOOPS "file.inc"`:
// defines that file's loop functions three times, in namespaces isa_avx512, isa_avx2 and
// isa_baseline, each compiled for its instruction set (widest_vectors.hpp). The .inc file holds
// only function definitions: every header it needs is included before this one, outside the
// target regions.
#ifndef CREST_WIDEST_VECTORS_LOOPS
#error "define CREST_WIDEST_VECTORS_LOOPS as the .inc file to expand"
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace isa_avx512 {
#include CREST_WIDEST_VECTORS_LOOPS  // NOLINT(readability-duplicate-include): once per level
}  // namespace isa_avx512
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
namespace isa_avx2 {
#include CREST_WIDEST_VECTORS_LOOPS  // NOLINT(readability-duplicate-include): once per level
}  // namespace isa_avx2
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#pragma GCC pop_options
#endif
namespace isa_baseline {
#include CREST_WIDEST_VECTORS_LOOPS  // NOLINT(readability-duplicate-include): once per level
}  // namespace isa_baseline

#undef CREST_WIDEST_VECTORS_LOOPS
