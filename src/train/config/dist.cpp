// dist: (a crest addition) how ranks work together (docs/distributed.md).
#include <optional>

#include "config/sections.hpp"

namespace crest::config {

namespace {

using S = DistConfig;

PipelineConfig read_pipeline_map(const SectionReader& r, const YAML::Node& map) {
  const std::string expected =
      "expected {stages: K, micro_batches: M, schedule: gpipe | 1f1b, recompute: bool, "
      "stage_starts: [layer, ...], balance: flops | time, rebalance: N}";
  if (!map.IsMap()) r.fail("pipeline", expected + ", got " + describe(map));
  PipelineConfig p;
  const std::string path = r.path_of("pipeline");
  std::optional<int> rebalance;
  for (auto kv = map.begin(); kv != map.end(); ++kv) {
    const YAML::Node key_node = kv->first, v = kv->second;  // copies: the iterator's are temporary
    const std::string key = key_node.IsScalar() ? key_node.Scalar() : "?";
    const std::string at = path + "." + key;
    if (key == "stages") {
      p.stages = static_cast<int>(r.to_int(at, key_node, v, 1, 1 << 16));
    } else if (key == "micro_batches") {
      p.micro_batches = static_cast<int>(r.to_int(at, key_node, v, 1, 1 << 16));
    } else if (key == "schedule") {
      p.schedule = v.IsScalar() ? v.Scalar() : "";
      if (p.schedule != "gpipe" && p.schedule != "1f1b")
        r.source().fail(at, key_node, "expected gpipe or 1f1b, got " + describe(v));
    } else if (key == "recompute") {
      p.recompute = r.to_bool(at, key_node, v);
    } else if (key == "balance") {
      p.balance = v.IsScalar() ? v.Scalar() : "";
      if (p.balance != "flops" && p.balance != "time")
        r.source().fail(at, key_node, "expected flops or time, got " + describe(v));
    } else if (key == "rebalance") {
      rebalance = static_cast<int>(r.to_int(at, key_node, v, 0, 16));
    } else if (key == "stage_starts") {
      if (!v.IsSequence())
        r.source().fail(at, key_node, "expected a list of layer names, got " + describe(v));
      for (size_t i = 0; i < v.size(); ++i) {
        const YAML::Node name = v[i];
        if (!name.IsScalar() || name.Scalar().empty())
          r.source().fail(at + "[" + std::to_string(i) + "]", key_node,
                          "expected a layer name, got " + describe(name));
        p.stage_starts.push_back(name.Scalar());
      }
    } else {
      r.source().fail(at, key_node,
                      "unknown key (pipeline accepts: stages, micro_batches, schedule, recompute, "
                      "stage_starts, balance, rebalance)");
    }
  }
  const bool time_balanced = p.balance == "time" && p.stage_starts.empty();
  if (rebalance && *rebalance > 0 && !time_balanced)
    r.fail("pipeline", "rebalance: " + std::to_string(*rebalance) +
                           " re-cuts a time-balanced cut: it needs balance: time and no "
                           "stage_starts");
  p.rebalance = rebalance.value_or(time_balanced ? 2 : 0);
  return p;
}

// pipeline: {stages, micro_batches, schedule, recompute, stage_starts, balance, rebalance}, keys of
// its own.
Field<S> pipeline_field() {
  return {"pipeline",
          [](const SectionReader& r, S& s) {
            const Entry* e = r.get("pipeline");
            if (e && !e->value.IsNull()) s.pipeline = read_pipeline_map(r, e->value);
          },
          [](const S& s, Lines& out) {
            const PipelineConfig& p = s.pipeline;
            if (p.stages <= 1) return;
            std::string starts;
            for (const std::string& n : p.stage_starts)
              starts += (starts.empty() ? "" : ", ") + quote(n);
            out.add("pipeline", "{stages: " + std::to_string(p.stages) + ", micro_batches: " +
                                    std::to_string(p.micro_batches) + ", schedule: " + p.schedule +
                                    ", recompute: " + (p.recompute ? "true" : "false") +
                                    ", stage_starts: [" + starts + "], balance: " + p.balance +
                                    ", rebalance: " + std::to_string(p.rebalance) + "}");
          }};
}

}  // namespace

const Table<DistConfig>& dist_table() {
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
        [](const S& s, Lines& l) { l.add("spatial", list_text(s.spatial)); }},
       pipeline_field()},
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
  // The ranks of a group read blocks of one sample, and a block one of them cannot read (a
  // truncated npy file, a non-finite value in one block) would put that rank alone on a spare
  // sample while the others stay on this one: their blocks would mix two samples.
  if (ranks > 1 && c.data.on_error == OnSampleError::skip)
    dist_reader.fail("spatial", list_text(parts) +
                                    " with data.on_error: skip is not supported yet: each rank "
                                    "reads its block of a sample, and a block one rank cannot "
                                    "read would leave the group on different samples (use "
                                    "data.on_error: fail)");
}

// What a pipeline does not run with yet, refused by name (docs/distributed.md "Pipeline
// stages").
void resolve_pipeline(const SectionReader& dist_reader, const Config& c) {
  const PipelineConfig& p = c.dist.pipeline;
  if (p.stages <= 1) return;
  const std::string with = "stages " + std::to_string(p.stages) + " with ";
  auto refuse = [&](const std::string& what) {
    dist_reader.fail("pipeline", with + what + " is not supported yet");
  };
  if (c.data.batch_size % p.micro_batches != 0)
    dist_reader.fail("pipeline", "micro_batches " + std::to_string(p.micro_batches) +
                                     " does not divide data.batch_size " +
                                     std::to_string(c.data.batch_size) +
                                     " (each rank's batch is cut into micro-batches)");
  if (!p.stage_starts.empty() && static_cast<int>(p.stage_starts.size()) != p.stages - 1)
    dist_reader.fail("pipeline", "stage_starts names " + std::to_string(p.stage_starts.size()) +
                                     " layers for " + std::to_string(p.stages) +
                                     " stages (the first layer of each stage after the first)");
  if (c.train.gradient_accumulation_frequency > 1)
    refuse("train.gradient_accumulation_frequency " +
           std::to_string(c.train.gradient_accumulation_frequency) +
           " (dist.pipeline.micro_batches accumulates already)");
}

}  // namespace crest::config

namespace crest {

int DistConfig::spatial_ranks() const {
  int ranks = 1;
  for (int64_t p : spatial) ranks *= static_cast<int>(p);
  return ranks;
}

}  // namespace crest
