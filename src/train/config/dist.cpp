// dist: (a crest addition) how ranks work together (docs/distributed.md).
#include "config/sections.hpp"

namespace crest::config {

const Table<DistConfig>& dist_table() {
  using S = DistConfig;
  static const Table<S> t{
      "dist",
      {word_field("backend", &S::backend, {"auto", "mpi", "single"},
                  "expected auto, mpi or single"),
       number_field("bucket_mb", &S::bucket_mb, positive_up_to(4096)),
       number_field("first_bucket_mb", &S::first_bucket_mb, positive_up_to(4096)),
       number_field("timeout_s", &S::timeout_s, positive_up_to(7 * 24 * 3600.0)),
       word_field("compress", &S::compress, {"none", "bf16", "fp16"},
                  "expected none, bf16 or fp16"),
       string_field("timeline", &S::timeline),
       int_field("batchnorm_group_size", &S::batchnorm_group_size, 1, 1 << 20)},
      {}};
  return t;
}

}  // namespace crest::config
