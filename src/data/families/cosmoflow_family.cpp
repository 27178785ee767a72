// The CosmoFlow data family: one sample per file, an int16 [D, D, D, 4] volume and 4 float
// targets, as the reference's TFRecords (one tf.train.Example: x bytes, y floats; plain or GZIP)
// or as .npy pairs (sample-<i>.data.npy + sample-<i>.label.npy).
#include <cmath>
#include <cstdio>
#include <span>

#include "crest/core/error.hpp"
#include "crest/data/data_family.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/synthetic/cosmoflow_generator.hpp"
#include "file_bytes.hpp"

namespace crest {
namespace {

constexpr int64_t kTargets = 4;

// sample-<i>.data.npy -> sample-<i>.label.npy
std::string label_path(const std::string& data_path) {
  return data_path.substr(0, data_path.size() - 9) + ".label.npy";
}

class CosmoflowDatagen final : public DatagenRun {
 public:
  CosmoflowDatagen(const DatagenOptions& o, int workers)
      : o_(o), npy_(o.format == "npy"), volumes_(static_cast<size_t>(workers)) {}

  std::string describe() const override { return std::to_string(o_.size) + "^3 x 4 int16"; }

  int64_t write(int worker, int /*split*/, int64_t index, uint64_t seed,
                const std::string& path) override {
    std::vector<int16_t>& volume = volumes_[static_cast<size_t>(worker)];
    volume.resize(static_cast<size_t>(o_.size * o_.size * o_.size * 4));
    float targets[kTargets];
    generate_cosmoflow_sample(seed, index, {o_.size, 4}, volume.data(), targets);
    if (npy_) {
      const std::string label = label_path(path);
      write_npy(label, DType::f32, {kTargets}, targets);
      write_npy(path, DType::i16, {o_.size, o_.size, o_.size, 4}, volume.data());
      return file_bytes(path) + file_bytes(label);
    }
    ExampleBuilder ex;
    ex.add_bytes("x", std::as_bytes(std::span<const int16_t>(volume)));
    ex.add_floats("y", std::span<const float>(targets, kTargets));
    TfRecordWriter w(path, o_.gzip ? TfRecordCompression::gzip : TfRecordCompression::none);
    w.write(ex.encode());
    w.close();
    return file_bytes(path);
  }

 private:
  const DatagenOptions o_;
  const bool npy_;
  std::vector<std::vector<int16_t>> volumes_;  // one per worker
};

void check_datagen_options(const DatagenOptions& o) {
  if (o.size < 32 || o.size % 32)
    throw_usage("datagen: --size " + std::to_string(o.size) + " must be a positive multiple of 32");
  if (o.gzip && o.format != "tfrecord") throw_usage("datagen: --gzip needs --format tfrecord");
  if (o.fused) throw_usage("datagen: --fused applies to DeepCAM npy files only");
}

std::string file_name(const DatagenOptions& o, int64_t index) {
  char buf[64];
  std::snprintf(buf, sizeof buf,
                o.format == "npy" ? "sample-%06lld.data.npy" : "sample-%06lld.tfrecord",
                static_cast<long long>(index));
  return buf;
}

Shape cube_from_bytes(size_t x_bytes) {
  // int16 [D, D, D, 4]: D^3 * 8 bytes.
  const auto d = static_cast<int64_t>(std::llround(std::cbrt(static_cast<double>(x_bytes) / 8.0)));
  if (d > 0 && static_cast<size_t>(d * d * d * 8) == x_bytes) return Shape{d, d, d, 4};
  return Shape{static_cast<int64_t>(x_bytes / 2)};  // not a cube: report the element count
}

SampleFileFacts check_tfrecord(const std::string& path, const ValidateOptions& o,
                               std::vector<std::byte>& record) {
  SampleFileFacts f;
  f.bytes = file_bytes(path);
  TfRecordReader reader(path, TfRecordCompression::detect);
  if (reader.compression() == TfRecordCompression::gzip) f.variant = "gzip";
  if (!reader.next(record)) throw_input("holds no record (expected one tf.train.Example)");
  const ExampleView ex = ExampleView::parse(record, path);
  const ExampleFeature& x = ex.at("x", ExampleFeature::Kind::bytes);
  const ExampleFeature& y = ex.at("y", ExampleFeature::Kind::floats);
  if (x.bytes.size() != 1)
    throw_input("feature 'x' holds " + std::to_string(x.bytes.size()) + " values, expected 1");
  if (static_cast<int64_t>(y.floats.size()) != o.targets)
    throw_input("feature 'y' holds " + std::to_string(y.floats.size()) + " floats, expected " +
                std::to_string(o.targets));
  for (float v : y.floats)
    if (!std::isfinite(v)) throw_input("feature 'y' holds a non-finite value");
  f.shape = cube_from_bytes(x.bytes[0].size());
  std::vector<std::byte> extra;
  if (reader.next(extra)) throw_input("holds more than one record (one sample per file expected)");
  return f;
}

SampleFileFacts check_npy(const std::string& path, const ValidateOptions& o,
                          std::vector<std::byte>& data) {
  SampleFileFacts f;
  const NpyHeader h = read_npy_header(path);
  if (h.dtype != NpyDType::i16) throw_input("dtype is not int16 ('<i2')");
  f.shape = Shape(h.shape);
  const std::string label = label_path(path);
  std::vector<float> y(static_cast<size_t>(o.targets));
  read_npy_into(label, DType::f32, {o.targets}, y.data());
  for (float v : y)
    if (!std::isfinite(v)) throw_input(label + ": holds a non-finite target");
  f.bytes = file_bytes(path) + file_bytes(label);
  // Read the data too: a header can promise more bytes than the file holds.
  data.resize(static_cast<size_t>(f.shape.numel()) * 2);
  read_npy_into(path, DType::i16, f.shape.to_vector(), data.data());
  return f;
}

DataFamily cosmoflow_family() {
  DataFamily f;
  f.name = "cosmoflow";
  f.description = "CosmoFlow 3-D volumes (tfrecord, gzip with --gzip, or npy)";
  f.formats = {"tfrecord", "npy"};
  f.check_options = check_datagen_options;
  f.file_name = file_name;
  f.start = [](const DatagenOptions& o, int workers) -> std::unique_ptr<DatagenRun> {
    return std::make_unique<CosmoflowDatagen>(o, workers);
  };
  f.layouts = {
      {"cosmoflow-tfrecord", "*.tfrecord",
       [](const std::string& name) { return name.ends_with(".tfrecord"); }, check_tfrecord},
      {"cosmoflow-npy", "*.data.npy",
       [](const std::string& name) { return name.ends_with(".data.npy"); }, check_npy},
  };
  return f;
}

}  // namespace

CREST_REGISTER_DATA_FAMILY(cosmoflow, cosmoflow_family());

}  // namespace crest
