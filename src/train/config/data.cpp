// data: the reference's dataset keys, then crest additions, one vocabulary for every registered
// dataset (crest/train/dataset_registry.hpp), whose entry checks its own rules. data.target_shape's
// default comes from the model (cross_section.cpp). DeepCAM (name: deepcam) reads the same section
// with the reference's argument names where they exist (data_dir_prefix, channels).
#include <algorithm>

#include "config/sections.hpp"
#include "crest/train/dataset_registry.hpp"

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

// The entries' count is the dataset's business (check_sample_shape). `scalar_allowed`: [] is one
// value per sample (target_shape of a class label).
Field<S> shape_field(const std::string& key, Shape S::*m, bool scalar_allowed = false) {
  return {key,
          [=](const SectionReader& r, S& s) {
            const auto v = r.opt_int_list(key, 1);
            if (!v) return;
            if ((v->empty() && !scalar_allowed) || v->size() > static_cast<size_t>(Shape::kMaxRank))
              r.fail(key, std::string("expected ") + (scalar_allowed ? "0" : "1") +
                              " to 8 sizes, got " + list_text(*v));
            s.*m = Shape(*v);
          },
          [=](const S& s, Lines& l) { l.add(key, (s.*m).str()); }};
}

// A sample count that DeepCAM may leave out (kEverySample, not printed).
Field<S> count_field(const std::string& key, int64_t S::*m, int64_t min) {
  return {key,
          [=](const SectionReader& r, S& s) {
            if (auto v = r.opt_int(key, min, std::numeric_limits<int64_t>::max())) s.*m = *v;
          },
          [=](const S& s, Lines& l) {
            if (s.*m != kEverySample) l.add(key, std::to_string(s.*m));
          }};
}

// data_dir_prefix is DeepCAM's name of data_dir: read into it, printed as data_dir.
Field<S> data_dir_prefix_field() {
  Field<S> f = string_field("data_dir_prefix", &S::data_dir);
  f.print = nullptr;
  return f;
}

// The list's values are checked against the sample's channel count in check_deepcam.
Field<S> channels_field() {
  return {"channels",
          [](const SectionReader& r, S& s) {
            if (auto v = r.opt_int_list("channels", 0)) s.channels = *v;
          },
          [](const S& s, Lines& l) {
            if (!s.channels.empty()) l.add("channels", list_text(s.channels));
          }};
}

// imagenet's own key: printed for it only (another dataset refuses it).
Field<S> reduced_decode_field() {
  Field<S> f = bool_field("reduced_decode", &S::reduced_decode);
  auto print = f.print;
  f.print = [print](const S& s, Lines& l) {
    if (s.name == "imagenet") print(s, l);
  };
  return f;
}

// shuffle_train is the reference's name of crest's shuffle: read into it, printed as shuffle.
Field<S> shuffle_train_field() {
  Field<S> f = bool_field("shuffle_train", &S::shuffle);
  f.print = nullptr;
  return f;
}

// Printed only for a dataset that takes it (deepcam), so a resolved CosmoFlow config reads back
// as it is.
Field<S> train_order_field() {
  Field<S> f = enum_field("train_order", &S::train_order);
  f.print = [](const S& s, Lines& l) {
    const auto& keys = find_dataset_type(s.name).keys;
    if (std::find(keys.begin(), keys.end(), "train_order") != keys.end())
      l.add("train_order", enum_name(s.train_order));
  };
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

// The section as a dataset's check sees it.
class ReaderSection final : public DataSection {
 public:
  explicit ReaderSection(const SectionReader& r) : r_(r) {}
  bool has(const std::string& key) const override { return r_.has(key); }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const override {
    r_.fail(key, message);
  }
  [[noreturn]] void fail_item(const std::string& key, size_t index,
                              const std::string& message) const override {
    const Entry* e = r_.get(key);
    if (!e) r_.fail(key, message);
    r_.source().fail(r_.path_of(key) + "[" + std::to_string(index) + "]", e->key, message);
  }

 private:
  const SectionReader& r_;
};

// Another dataset's own key, refused rather than ignored (deepcam's channels under cosmo).
void refuse_other_datasets_keys(const SectionReader& r, const DatasetType& type) {
  for (const auto& other : dataset_names()) {
    if (other == type.name) continue;
    for (const auto& key : find_dataset_type(other).keys)
      if (r.has(key) && std::find(type.keys.begin(), type.keys.end(), key) == type.keys.end())
        r.fail(key, "applies to data.name: " + other + ", not " + type.name);
  }
}

void check_data(const SectionReader& r, S& d) {
  const DatasetType& type = find_dataset_type(d.name);
  refuse_other_datasets_keys(r, type);
  type.check(ReaderSection(r), d);
  if (d.n_train > 0 && d.n_train < d.batch_size)
    r.fail("n_train", std::to_string(d.n_train) + " samples make no batch of data.batch_size " +
                          std::to_string(d.batch_size));
  // A dataset validating every sample (DeepCAM) batches them as full as the samples allow.
  if (!type.validates_every_sample && d.n_valid > 0 && d.n_valid < d.batch_size)
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
  static const Table<S> t{
      "data",
      {registered_name_field("name", &S::name, dataset_names),
       string_field("data_dir", &S::data_dir), compression_field(),
       count_field("n_train", &S::n_train, 1), count_field("n_valid", &S::n_valid, 0),
       shape_field("sample_shape", &S::sample_shape),
       shape_field("target_shape", &S::target_shape, /*scalar_allowed=*/true),
       required(int_field("batch_size", &S::batch_size, 1)),
       required(int_field("n_epochs", &S::n_epochs, 1)), bool_field("shard", &S::shard),
       bool_field("apply_log", &S::apply_log), int_field("prefetch", &S::prefetch, 0),
       int_field("n_parallel_reads", &S::n_parallel_reads, 0),
       int_field("samples_per_file", &S::samples_per_file, 1), shuffle_train_field(),
       bool_field("shuffle_valid", &S::shuffle_valid),
       // crest additions
       bool_field("shuffle", &S::shuffle), seed_field(), cache_field(),
       string_field("stage_dir", &S::stage_dir), enum_field("on_error", &S::on_error),
       enum_field("format", &S::format),
       // DeepCAM (the reference's argument names)
       data_dir_prefix_field(), channels_field(), train_order_field(),
       // imagenet
       reduced_decode_field()},
      check_data};
  return t;
}

}  // namespace crest::config

namespace crest {

Shape DataConfig::model_sample_shape() const {
  const DatasetType* type = find_dataset_type_or_null(name);
  return type && type->model_sample_shape ? type->model_sample_shape(*this) : sample_shape;
}

}  // namespace crest
