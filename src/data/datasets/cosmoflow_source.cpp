#include "crest/data/datasets/cosmoflow_source.hpp"

#include <array>
#include <cmath>
#include <cstring>

#include "crest/core/error.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/formats/tfrecord.hpp"

namespace crest {
namespace {

// int16 -> float32 for every possible value, with or without ln(x + 1): a table lookup is exact
// (it is the same std::log1p per value) and ~20x cheaper than calling log1p 8 million times per
// 128^3 x 4 sample. Negative counts (not in real data) follow log1p: -1 -> -inf, below -> NaN.
const std::array<float, 65536>& int16_table(bool apply_log) {
  static const auto make = [](bool log) {
    std::array<float, 65536> t{};
    for (int v = -32768; v <= 32767; ++v)
      t[static_cast<uint16_t>(static_cast<int16_t>(v))] =
          log ? static_cast<float>(std::log1p(static_cast<double>(v))) : static_cast<float>(v);
    return t;
  };
  static const std::array<float, 65536> plain = make(false), logged = make(true);
  return apply_log ? logged : plain;
}

// Little-endian int16 bytes (the files' byte order, and ours) to float through the table.
void convert_volume(const std::byte* src, int64_t n, bool apply_log, float* dst) {
  const auto& table = int16_table(apply_log);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dst[i] = table[bits];
  }
}

class CosmoflowSource : public SampleSource {
 public:
  CosmoflowSource(const CosmoflowSourceOptions& o, std::vector<std::string> files)
      : opts_(o), files_(std::move(files)) {
    spec_.x_shape = o.sample_shape;
    spec_.y_shape = Shape{o.targets};
    voxels_ = o.sample_shape.numel();
  }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  const std::string& path(int64_t i) const override { return files_[static_cast<size_t>(i)]; }

 protected:
  CosmoflowSourceOptions opts_;
  std::vector<std::string> files_;
  SampleSpec spec_;
  int64_t voxels_ = 0;
};

class CosmoflowTfrecordSource final : public CosmoflowSource {
 public:
  using CosmoflowSource::CosmoflowSource;
  std::string format() const override {
    return opts_.gzip ? "cosmoflow-tfrecord-gzip" : "cosmoflow-tfrecord";
  }

  void read(int64_t i, std::vector<std::byte>& payload) const override {
    // The configured compression is what the reference would use; a file that disagrees is
    // named as such rather than failing with a CRC error.
    const std::string& file = path(i);
    TfRecordReader probe(file, TfRecordCompression::detect);
    const bool is_gzip = probe.compression() == TfRecordCompression::gzip;
    if (is_gzip != opts_.gzip)
      throw_input(file + ": the file is " + (is_gzip ? "GZIP-compressed" : "not compressed") +
                  " but data.compression is " + (opts_.gzip ? "GZIP" : "null"));
    std::vector<std::byte>& record = payload;
    if (!probe.next(record))
      throw_input(file + ": holds no record (expected one tf.train.Example)");
    std::vector<std::byte> extra;
    if (probe.next(extra))
      throw_input(
          file +
          ": holds more than one record (crest reads one sample per file, as the reference data)");
  }

  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    const ExampleView ex = ExampleView::parse(payload, path(i));
    convert_volume(volume(i, ex).data(), voxels_, opts_.apply_log, x);
    copy_targets(i, ex, y);
  }

  // The targets without converting the volume (its size is still checked, as decode checks it).
  void decode_targets(int64_t i, std::span<const std::byte> payload, void* y,
                      const SampleDraw& /*draw*/) const override {
    const ExampleView ex = ExampleView::parse(payload, path(i));
    volume(i, ex);
    copy_targets(i, ex, y);
  }

 private:
  // Feature 'x': one int16 volume of data.sample_shape.
  std::span<const std::byte> volume(int64_t i, const ExampleView& ex) const {
    const std::string& file = path(i);
    const ExampleFeature& fx = ex.at("x", ExampleFeature::Kind::bytes);
    if (fx.bytes.size() != 1)
      throw_input(file + ": feature 'x' holds " + std::to_string(fx.bytes.size()) +
                  " values, expected 1");
    const size_t expect = static_cast<size_t>(voxels_) * 2;
    if (fx.bytes[0].size() != expect)
      throw_input(file + ": feature 'x' is " + std::to_string(fx.bytes[0].size()) +
                  " bytes, expected " + std::to_string(expect) + " (int16 " + spec_.x_shape.str() +
                  ", data.sample_shape)");
    return fx.bytes[0];
  }

  // Feature 'y': model.target_size floats, into y.
  void copy_targets(int64_t i, const ExampleView& ex, void* y) const {
    const ExampleFeature& fy = ex.at("y", ExampleFeature::Kind::floats);
    if (static_cast<int64_t>(fy.floats.size()) != opts_.targets)
      throw_input(path(i) + ": feature 'y' holds " + std::to_string(fy.floats.size()) +
                  " floats, expected " + std::to_string(opts_.targets) + " (model.target_size)");
    std::memcpy(y, fy.floats.data(), fy.floats.size() * sizeof(float));
  }
};

// NVIDIA's variant: the payload is the int16 volume followed by the float32 targets.
class CosmoflowNpySource final : public CosmoflowSource {
 public:
  using CosmoflowSource::CosmoflowSource;
  std::string format() const override { return "cosmoflow-npy"; }

  static std::string label_path(const std::string& data_path) {
    return data_path.substr(0, data_path.size() - std::strlen(".data.npy")) + ".label.npy";
  }

  void read(int64_t i, std::vector<std::byte>& payload) const override {
    const std::string& file = path(i);
    const size_t xb = static_cast<size_t>(voxels_) * 2, yb = static_cast<size_t>(opts_.targets) * 4;
    payload.resize(xb + yb);
    read_npy_into(file, DType::i16, spec_.x_shape.to_vector(), payload.data());
    read_npy_into(label_path(file), DType::f32, spec_.y_shape.to_vector(), payload.data() + xb);
  }

  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    decode_voxels(i, payload, voxels_, x, y);
  }

  // A block: only its rows of the volume are read (one read per contiguous run), then the
  // targets.
  bool reads_blocks() const override { return true; }
  void read_block(int64_t i, const SampleBlock& block,
                  std::vector<std::byte>& payload) const override {
    const std::string& file = path(i);
    const auto xb = static_cast<size_t>(block.x_shape(spec_.x_shape).numel()) * 2;
    const size_t yb = static_cast<size_t>(opts_.targets) * 4;
    payload.resize(xb + yb);
    read_npy_block_into(file, DType::i16, spec_.x_shape.to_vector(), block.begin, block.end,
                        payload.data());
    read_npy_into(label_path(file), DType::f32, spec_.y_shape.to_vector(), payload.data() + xb);
  }
  void decode_block(int64_t i, const SampleBlock& block, std::span<const std::byte> payload,
                    float* x, void* y, const SampleDraw& /*draw*/) const override {
    decode_voxels(i, payload, block.x_shape(spec_.x_shape).numel(), x, y);
  }

  // The targets alone: only the label file is read.
  bool reads_targets_alone() const override { return true; }
  void read_targets(int64_t i, std::vector<std::byte>& payload) const override {
    payload.resize(static_cast<size_t>(opts_.targets) * 4);
    read_npy_into(label_path(path(i)), DType::f32, spec_.y_shape.to_vector(), payload.data());
  }
  void decode_targets(int64_t i, std::span<const std::byte> payload, void* y,
                      const SampleDraw& /*draw*/) const override {
    decode_voxels(i, payload, 0, nullptr, y);
  }

 private:
  // The payload: `voxels` int16 values, then the float32 targets.
  void decode_voxels(int64_t i, std::span<const std::byte> payload, int64_t voxels, float* x,
                     void* y) const {
    const size_t xb = static_cast<size_t>(voxels) * 2, yb = static_cast<size_t>(opts_.targets) * 4;
    CREST_CHECK(payload.size() == xb + yb, "npy payload size of " + path(i));
    if (voxels > 0) convert_volume(payload.data(), voxels, opts_.apply_log, x);
    std::memcpy(y, payload.data() + xb, yb);
  }
};

}  // namespace

const char* cosmoflow_file_suffix(CosmoflowFileFormat format) {
  return format == CosmoflowFileFormat::npy ? ".data.npy" : ".tfrecord";
}

std::shared_ptr<SampleSource> open_cosmoflow_source(const CosmoflowSourceOptions& o) {
  if (o.sample_shape.rank() != 4) throw_input("data.sample_shape: expected [D, H, W, C]");
  std::vector<std::string> files = list_sample_files(o.dir, {cosmoflow_file_suffix(o.format)});
  if (o.limit > 0) {
    if (static_cast<int64_t>(files.size()) < o.limit)
      throw_input(o.dir + ": holds " + std::to_string(files.size()) + " sample files but " +
                  std::to_string(o.limit) + " are configured (data.n_train / data.n_valid)");
    files.resize(static_cast<size_t>(o.limit));
  }
  if (o.format == CosmoflowFileFormat::npy)
    return std::make_shared<CosmoflowNpySource>(o, std::move(files));
  return std::make_shared<CosmoflowTfrecordSource>(o, std::move(files));
}

}  // namespace crest
