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
       int_field("batchnorm_group_size", &S::batchnorm_group_size, 1, 1 << 20),
       word_field("halo_overlap", &S::halo_overlap, {"auto", "always", "off"},
                  "expected auto, always or off"),
       {"spatial",
        [](const SectionReader& r, S& s) {
          if (auto v = r.opt_int_list("spatial", 1)) s.spatial = *v;
        },
        [](const S& s, Lines& l) { l.add("spatial", list_text(s.spatial)); }}},
      {}};
  return t;
}

void resolve_spatial(const SectionReader& dist_reader, Config& c) {
  const auto axes = static_cast<size_t>(c.data.model_sample_shape().rank() - 1);
  std::vector<int64_t>& parts = c.dist.spatial;
  if (parts.empty()) parts.assign(axes, 1);
  const std::string dims = axes == 3 ? "[d, h, w]" : axes == 2 ? "[h, w]" : "";
  if (parts.size() != axes)
    dist_reader.fail("spatial", "expected " + std::to_string(axes) + " parts " + dims +
                                    ", one per spatial axis of the samples (data.sample_shape " +
                                    list_text(c.data.sample_shape.to_vector()) + "), got " +
                                    list_text(parts));
  int64_t ranks = 1;
  for (int64_t p : parts) ranks *= p;
  if (ranks > (1 << 20)) dist_reader.fail("spatial", list_text(parts) + " is too many ranks");
  // The compiled program splits float32 and float64 tensors only.
  if (ranks > 1 && (c.crest.precision == Precision::bf16 || c.crest.precision == Precision::fp16))
    dist_reader.fail("spatial", list_text(parts) +
                                    " splits samples, which runs in float32 or "
                                    "float64; crest.precision is " +
                                    enum_name(c.crest.precision));
  // A split sample's gradients are sums over its group, exchanged every step.
  if (ranks > 1 && c.train.local_sgd_steps > 1)
    dist_reader.fail("spatial", list_text(parts) + " with train.local_sgd (steps " +
                                    std::to_string(c.train.local_sgd_steps) +
                                    ") is not supported yet: a split sample's gradients are "
                                    "summed over its group every step");
}

}  // namespace crest::config

namespace crest {

int DistConfig::spatial_ranks() const {
  int ranks = 1;
  for (int64_t p : spatial) ranks *= static_cast<int>(p);
  return ranks;
}

}  // namespace crest
