// data: the reference's dataset keys, then crest additions. data.target_shape's default comes
// from the model (cross_section.cpp).
#include "config/sections.hpp"

namespace crest::config {
namespace {

using S = DataConfig;

// The reference writes null (or nothing) for uncompressed files and GZIP for gzip.
Field<S> compression_field() {
  return {"compression",
          [](const SectionReader& r, S& s) {
            const auto v = r.opt_string("compression");
            if (!v) return;
            const std::string t = lower(*v);
            if (t == "gzip")
              s.compression = Compression::gzip;
            else if (t.empty() || t == "none")
              s.compression = Compression::none;
            else
              r.fail("compression", "expected null (uncompressed) or GZIP, got " + quote(*v));
          },
          [](const S& s, Lines& l) {
            l.add("compression", s.compression == Compression::gzip ? "GZIP" : "null");
          }};
}

Field<S> shape_field(const std::string& key, Shape S::*m, size_t rank, const std::string& dims) {
  return {key,
          [=](const SectionReader& r, S& s) {
            const auto v = r.opt_int_list(key, 1);
            if (!v) return;
            if (rank && v->size() != rank)
              r.fail(key, "expected " + std::to_string(rank) + " entries " + dims + ", got " +
                              std::to_string(v->size()) + ": " + list_text(*v));
            s.*m = Shape(*v);
          },
          [=](const S& s, Lines& l) { l.add(key, (s.*m).str()); }};
}

// shuffle_train is the reference's name of crest's shuffle: read into it, printed as shuffle.
Field<S> shuffle_train_field() {
  Field<S> f = bool_field("shuffle_train", &S::shuffle);
  f.print = nullptr;
  return f;
}

Field<S> seed_field() {
  return {"seed",
          [](const SectionReader& r, S& s) { s.seed = r.opt_uint64("seed").value_or(s.seed); },
          [](const S& s, Lines& l) { l.add("seed", std::to_string(s.seed)); }};
}

Field<S> cache_field() {
  return {"cache_bytes",
          [](const SectionReader& r, S& s) {
            s.cache_bytes = r.opt_bytes("cache_bytes").value_or(s.cache_bytes);
          },
          [](const S& s, Lines& l) { l.add("cache_bytes", std::to_string(s.cache_bytes)); }};
}

void check_data(const SectionReader& r, S& d) {
  if (d.name == DatasetKind::cosmo && d.data_dir.empty())
    r.fail("data_dir",
           "required for data.name: cosmo (the directory holding train/ and validation/), or use "
           "data.name: dummy for synthetic data");
  if (d.n_train < d.batch_size)
    r.fail("n_train", std::to_string(d.n_train) + " samples make no batch of data.batch_size " +
                          std::to_string(d.batch_size));
  if (d.n_valid > 0 && d.n_valid < d.batch_size)
    r.fail("n_valid", std::to_string(d.n_valid) + " samples make no batch of data.batch_size " +
                          std::to_string(d.batch_size) + " (use 0 for no validation)");
  if (d.samples_per_file != 1)
    r.fail("samples_per_file", "crest reads one sample per file (the reference data layout); got " +
                                   std::to_string(d.samples_per_file));
  const auto shuffle = r.opt_bool("shuffle"), shuffle_train = r.opt_bool("shuffle_train");
  if (shuffle && shuffle_train && *shuffle != *shuffle_train)
    r.fail("shuffle", "contradicts data.shuffle_train (the same setting); give one");
}

}  // namespace

const Table<DataConfig>& data_table() {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  static const Table<S> t{
      "data",
      {required(enum_field("name", &S::name), " (cosmo or dummy)"),
       string_field("data_dir", &S::data_dir), compression_field(),
       required(int_field("n_train", &S::n_train, 1, kMax)),
       int_field("n_valid", &S::n_valid, 0, kMax),
       required(shape_field("sample_shape", &S::sample_shape, 4, "[D, H, W, C]"),
                " ([D, H, W, C])"),
       shape_field("target_shape", &S::target_shape, 0, ""),
       required(int_field("batch_size", &S::batch_size, 1)),
       required(int_field("n_epochs", &S::n_epochs, 1)), bool_field("shard", &S::shard),
       bool_field("apply_log", &S::apply_log), int_field("prefetch", &S::prefetch, 0),
       int_field("n_parallel_reads", &S::n_parallel_reads, 0),
       int_field("samples_per_file", &S::samples_per_file, 1), shuffle_train_field(),
       bool_field("shuffle_valid", &S::shuffle_valid),
       // crest additions
       bool_field("shuffle", &S::shuffle), seed_field(), cache_field(),
       string_field("stage_dir", &S::stage_dir), enum_field("on_error", &S::on_error),
       enum_field("format", &S::format)},
      check_data};
  return t;
}

}  // namespace crest::config
