// data: the reference's dataset keys, then crest additions. data.target_shape's default comes
// from the model (cross_section.cpp). DeepCAM (name: deepcam) reads the same section with the
// reference's argument names where they exist (data_dir_prefix, channels).
#include <numeric>

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

// The entries' count is the dataset's business (check_sample_shape).
Field<S> shape_field(const std::string& key, Shape S::*m) {
  return {key,
          [=](const SectionReader& r, S& s) {
            const auto v = r.opt_int_list(key, 1);
            if (!v) return;
            if (v->empty() || v->size() > static_cast<size_t>(Shape::kMaxRank))
              r.fail(key, "expected 1 to 8 sizes, got " + list_text(*v));
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

// shuffle_train is the reference's name of crest's shuffle: read into it, printed as shuffle.
Field<S> shuffle_train_field() {
  Field<S> f = bool_field("shuffle_train", &S::shuffle);
  f.print = nullptr;
  return f;
}

// DeepCAM's only: printed for DeepCAM alone, so a resolved CosmoFlow config reads back as it is.
Field<S> train_order_field() {
  Field<S> f = enum_field("train_order", &S::train_order);
  f.print = [](const S& s, Lines& l) {
    if (s.name == DatasetKind::deepcam) l.add("train_order", enum_name(s.train_order));
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

void check_sample_shape(const SectionReader& r, const S& d, size_t rank, const std::string& dims) {
  if (d.sample_shape.rank() == 0) r.fail("sample_shape", "required key is missing (" + dims + ")");
  if (static_cast<size_t>(d.sample_shape.rank()) != rank)
    r.fail("sample_shape", "expected " + std::to_string(rank) + " entries " + dims + ", got " +
                               std::to_string(d.sample_shape.rank()) + ": " +
                               list_text(d.sample_shape.to_vector()));
}

// Keys of the CosmoFlow files that mean nothing for DeepCAM's, refused rather than ignored.
void refuse_cosmoflow_keys(const SectionReader& r, const S& d) {
  if (d.compression != Compression::none)
    r.fail("compression", "applies to CosmoFlow TFRecords; DeepCAM files are not compressed");
  if (d.apply_log) r.fail("apply_log", "applies to CosmoFlow; DeepCAM data is min-max normalised");
  if (d.format == SampleFileFormat::tfrecord && r.has("format"))
    r.fail("format", "DeepCAM samples are hdf5 (the reference) or npy (NVIDIA's), not tfrecord");
}

// The channels the model reads: every one by default, else each an index into the file's.
void check_channels(const SectionReader& r, S& d) {
  const int64_t file_channels = d.sample_shape[2];
  if (!r.has("channels")) {
    d.channels.resize(static_cast<size_t>(file_channels));
    std::iota(d.channels.begin(), d.channels.end(), int64_t{0});
    return;
  }
  const Entry& e = *r.get("channels");
  if (d.channels.empty()) r.fail("channels", "lists no channel (leave it out to read all)");
  for (size_t i = 0; i < d.channels.size(); ++i)
    if (d.channels[i] >= file_channels)
      r.source().fail(r.path_of("channels") + "[" + std::to_string(i) + "]", e.key,
                      "channel " + std::to_string(d.channels[i]) + " does not exist: the samples " +
                          "have " + std::to_string(file_channels) + " (0 to " +
                          std::to_string(file_channels - 1) + ", data.sample_shape)");
}

// The reference's order reshuffles every epoch: unshuffled it would be no order the reference has.
void check_train_order(const SectionReader& r, const S& d) {
  if (d.train_order != TrainOrder::reference || d.shuffle) return;
  const char* key = r.has("shuffle") ? "shuffle" : "shuffle_train";
  r.fail(key, std::string("false contradicts data.train_order: reference (the reference ") +
                  "reshuffles the training files every epoch); leave " + key +
                  " out, or use train_order: crest for sorted order");
}

void check_deepcam(const SectionReader& r, S& d) {
  if (d.data_dir.empty())
    r.fail("data_dir",
           "required for data.name: deepcam (the directory holding train/, validation/ and "
           "stats.h5; the reference's data_dir_prefix)");
  if (r.has("data_dir") && r.has("data_dir_prefix"))
    r.fail("data_dir_prefix", "is data_dir under the reference's name; give one");
  refuse_cosmoflow_keys(r, d);
  if (d.format == SampleFileFormat::tfrecord) d.format = SampleFileFormat::hdf5;
  if (d.sample_shape.rank() == 0) d.sample_shape = Shape{768, 1152, 16};  // the reference data
  check_sample_shape(r, d, 3, "[H, W, C]");
  if (d.sample_shape[0] % 16 || d.sample_shape[1] % 16)
    r.fail("sample_shape",
           "height and width must be multiples of 16 (DeepLabv3+'s output "
           "stride), got " +
               list_text(d.sample_shape.to_vector()));
  check_channels(r, d);
  check_train_order(r, d);
  if (!r.has("n_train")) d.n_train = kEverySample;
  if (!r.has("n_valid")) d.n_valid = kEverySample;
}

void check_cosmoflow(const SectionReader& r, S& d) {
  if (d.name == DatasetKind::cosmo && d.data_dir.empty())
    r.fail("data_dir",
           "required for data.name: cosmo (the directory holding train/ and validation/), or use "
           "data.name: dummy for synthetic data");
  for (const char* deepcam_key : {"channels", "data_dir_prefix", "train_order"})
    if (r.has(deepcam_key))
      r.fail(deepcam_key, "applies to data.name: deepcam, not " + enum_name(d.name));
  if (d.format == SampleFileFormat::hdf5)
    r.fail("format", "CosmoFlow samples are tfrecord or npy; hdf5 is DeepCAM's");
  if (!r.has("n_train")) r.fail("n_train", "required key is missing");
  check_sample_shape(r, d, 4, "[D, H, W, C]");
}

void check_data(const SectionReader& r, S& d) {
  if (d.name == DatasetKind::deepcam)
    check_deepcam(r, d);
  else
    check_cosmoflow(r, d);
  if (d.n_train > 0 && d.n_train < d.batch_size)
    r.fail("n_train", std::to_string(d.n_train) + " samples make no batch of data.batch_size " +
                          std::to_string(d.batch_size));
  // DeepCAM validates every sample, in batches as full as the samples allow.
  if (d.name != DatasetKind::deepcam && d.n_valid > 0 && d.n_valid < d.batch_size)
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
      {required(enum_field("name", &S::name), " (cosmo, dummy or deepcam)"),
       string_field("data_dir", &S::data_dir), compression_field(),
       count_field("n_train", &S::n_train, 1), count_field("n_valid", &S::n_valid, 0),
       shape_field("sample_shape", &S::sample_shape), shape_field("target_shape", &S::target_shape),
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
       data_dir_prefix_field(), channels_field(), train_order_field()},
      check_data};
  return t;
}

}  // namespace crest::config

namespace crest {

Shape DataConfig::model_sample_shape() const {
  if (name != DatasetKind::deepcam) return sample_shape;
  return Shape{sample_shape[0], sample_shape[1], static_cast<int64_t>(channels.size())};
}

}  // namespace crest
