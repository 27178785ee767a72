#include "crest/data/validate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>

#include "crest/core/error.hpp"
#include "crest/core/parallel_for.hpp"
#include "crest/core/progress.hpp"
#include "crest/core/units.hpp"
#include "crest/data/datasets/deepcam_files.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/formats/tfrecord.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

enum class Kind { cosmo_tfrecord, cosmo_npy, deepcam_hdf5, deepcam_npy, deepcam_npy_fused };

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// What one file holds, as far as the shape check needs it.
struct FileFacts {
  Shape shape;  // of x
  std::string error;
  int64_t bytes = 0;
  bool gzip = false;
};

Shape cube_from_bytes(size_t x_bytes) {
  // int16 [D, D, D, 4]: D^3 * 8 bytes.
  const auto d = static_cast<int64_t>(std::llround(std::cbrt(static_cast<double>(x_bytes) / 8.0)));
  if (d > 0 && static_cast<size_t>(d * d * d * 8) == x_bytes) return Shape{d, d, d, 4};
  return Shape{static_cast<int64_t>(x_bytes / 2)};  // not a cube: report the element count
}

FileFacts check_cosmo_tfrecord(const std::string& path, int64_t targets,
                               std::vector<std::byte>& record) {
  FileFacts f;
  std::error_code ec;
  f.bytes = static_cast<int64_t>(fs::file_size(path, ec));
  TfRecordReader reader(path, TfRecordCompression::detect);
  f.gzip = reader.compression() == TfRecordCompression::gzip;
  if (!reader.next(record)) throw_input("holds no record (expected one tf.train.Example)");
  const ExampleView ex = ExampleView::parse(record, path);
  const ExampleFeature& x = ex.at("x", ExampleFeature::Kind::bytes);
  const ExampleFeature& y = ex.at("y", ExampleFeature::Kind::floats);
  if (x.bytes.size() != 1)
    throw_input("feature 'x' holds " + std::to_string(x.bytes.size()) + " values, expected 1");
  if (static_cast<int64_t>(y.floats.size()) != targets)
    throw_input("feature 'y' holds " + std::to_string(y.floats.size()) + " floats, expected " +
                std::to_string(targets));
  for (float v : y.floats)
    if (!std::isfinite(v)) throw_input("feature 'y' holds a non-finite value");
  f.shape = cube_from_bytes(x.bytes[0].size());
  std::vector<std::byte> extra;
  if (reader.next(extra)) throw_input("holds more than one record (one sample per file expected)");
  return f;
}

FileFacts check_cosmo_npy(const std::string& path, int64_t targets) {
  FileFacts f;
  const NpyHeader h = read_npy_header(path);
  if (h.dtype != NpyDType::i16) throw_input("dtype is not int16 ('<i2')");
  f.shape = Shape(h.shape);
  const std::string label = path.substr(0, path.size() - 9) + ".label.npy";
  std::vector<float> y(static_cast<size_t>(targets));
  read_npy_into(label, DType::f32, {targets}, y.data());
  for (float v : y)
    if (!std::isfinite(v)) throw_input(label + ": holds a non-finite target");
  std::error_code ec;
  f.bytes = static_cast<int64_t>(fs::file_size(path, ec) + fs::file_size(label, ec));
  // Read the data too: a header can promise more bytes than the file holds.
  std::vector<std::byte> data(static_cast<size_t>(f.shape.numel()) * 2);
  read_npy_into(path, DType::i16, f.shape.to_vector(), data.data());
  return f;
}

void check_labels_and_data(const std::vector<float>& data, const std::vector<int32_t>& labels,
                           int64_t width) {
  for (size_t i = 0; i < data.size(); ++i)
    if (!std::isfinite(data[i]))
      throw_input("climate/data holds a non-finite value at element " + std::to_string(i));
  for (size_t p = 0; p < labels.size(); ++p)
    if (labels[p] < 0 || labels[p] > 2)
      throw_input("label " + std::to_string(labels[p]) + " at pixel (" +
                  std::to_string(static_cast<int64_t>(p) / width) + ", " +
                  std::to_string(static_cast<int64_t>(p) % width) + ") is not 0, 1 or 2");
}

FileFacts check_deepcam(const std::string& path, Kind kind) {
  FileFacts f;
  const DeepcamFileFormat format =
      kind == Kind::deepcam_hdf5 ? DeepcamFileFormat::hdf5 : DeepcamFileFormat::npy;
  const DeepcamNpyLayout layout =
      kind == Kind::deepcam_npy_fused ? DeepcamNpyLayout::fused : DeepcamNpyLayout::pairs;
  const DeepcamSampleShape s = probe_deepcam_file(path, format, layout);
  f.shape = Shape{s.height, s.width, s.channels};
  std::vector<float> data(static_cast<size_t>(s.height * s.width * s.channels));
  std::vector<int32_t> labels(static_cast<size_t>(s.height * s.width));
  read_deepcam_file(path, format, layout, s, data.data(), labels.data());
  check_labels_and_data(data, labels, s.width);
  std::error_code ec;
  f.bytes = static_cast<int64_t>(fs::file_size(path, ec));
  if (kind == Kind::deepcam_npy)
    f.bytes += static_cast<int64_t>(fs::file_size(deepcam_label_path(path), ec));
  return f;
}

// <root>/stats.h5 beside a DeepCAM dataset's splits: readable, one value per sample channel, and
// every channel's maxval above its minval (the normalisation divides by their difference).
std::string check_deepcam_stats(const std::string& path, int64_t channels) {
  try {
    const DeepcamStats st = read_deepcam_stats(path);
    if (static_cast<int64_t>(st.minval.size()) != channels)
      return "holds statistics of " + std::to_string(st.minval.size()) +
             " channels, the samples have " + std::to_string(channels);
    for (size_t c = 0; c < st.minval.size(); ++c)
      if (!(st.maxval[c] > st.minval[c]))
        return "channel " + std::to_string(c) + " has maxval " + std::to_string(st.maxval[c]) +
               " not above minval " + std::to_string(st.minval[c]);
  } catch (const Error& e) {
    std::string what = e.what();
    if (starts_with(what, path + ": ")) what = what.substr(path.size() + 2);
    return what;
  }
  return "";
}

bool has_splits(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(fs::path(dir) / "train", ec) ||
         fs::is_directory(fs::path(dir) / "validation", ec);
}

// The split directories to check, and the files of each.
std::vector<std::string> dataset_files(const std::string& dir, Kind& kind,
                                       const std::string& format) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw_input(dir + ": not a directory");
  std::vector<fs::path> dirs;
  for (const char* split : {"train", "validation"})
    if (fs::is_directory(fs::path(dir) / split, ec)) dirs.push_back(fs::path(dir) / split);
  if (dirs.empty()) dirs.push_back(dir);
  std::map<Kind, std::vector<std::string>> by_kind;
  for (const auto& d : dirs)
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!it->is_regular_file(ec) || starts_with(name, ".")) continue;
      const std::string p = it->path().string();
      if (ends_with(name, ".tfrecord"))
        by_kind[Kind::cosmo_tfrecord].push_back(p);
      else if (ends_with(name, ".data.npy"))
        by_kind[Kind::cosmo_npy].push_back(p);
      else if (ends_with(name, ".h5"))  // every .h5 of a split, as the reference reads them
        by_kind[Kind::deepcam_hdf5].push_back(p);
      else if (starts_with(name, "datalabel-") && ends_with(name, ".npy"))
        by_kind[Kind::deepcam_npy_fused].push_back(p);
      else if (starts_with(name, "data-") && ends_with(name, ".npy"))
        by_kind[Kind::deepcam_npy].push_back(p);
    }
  if (ec) throw_input(dir + ": cannot list: " + ec.message());
  if (format == "cosmoflow") {
    by_kind.erase(Kind::deepcam_hdf5);
    by_kind.erase(Kind::deepcam_npy);
    by_kind.erase(Kind::deepcam_npy_fused);
  } else if (format == "deepcam") {
    by_kind.erase(Kind::cosmo_tfrecord);
    by_kind.erase(Kind::cosmo_npy);
  } else if (!format.empty()) {
    throw_usage("validate: --format must be cosmoflow or deepcam, got '" + format + "'");
  }
  if (by_kind.empty())
    throw_input(dir + ": no sample files found (*.tfrecord, *.data.npy, *.h5, data-*.npy, " +
                "datalabel-*.npy" + std::string(format.empty() ? "" : " for " + format) + ")");
  if (by_kind.size() > 1)
    throw_input(dir + ": holds sample files of several formats; pass --format or separate them");
  kind = by_kind.begin()->first;
  auto files = by_kind.begin()->second;
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string ValidateReport::summary() const {
  std::ostringstream s;
  s << "validated " << files << " files (" << format << ", sample shape " << sample_shape.str()
    << "): " << samples << " good samples, " << human_bytes(static_cast<double>(bytes)) << ", "
    << errors.size() << " bad files";
  return s.str();
}

ValidateReport validate_dataset(const ValidateOptions& o, std::ostream& log) {
  ValidateReport r;
  Kind kind = Kind::cosmo_tfrecord;
  const std::vector<std::string> files = dataset_files(o.dir, kind, o.format);
  std::vector<FileFacts> facts(files.size());
  Progress progress("validate", static_cast<int64_t>(files.size()));
  const int threads = o.threads > 0 ? o.threads : hardware_threads();
  std::vector<std::vector<std::byte>> records(
      static_cast<size_t>(parallel_for_workers(files.size(), threads)));  // one per worker
  // A bad file is a finding, not a failure: every file is checked and its error kept.
  parallel_for(files.size(), threads, [&](size_t i, int worker) {
    FileFacts& f = facts[i];
    try {
      if (kind == Kind::cosmo_tfrecord)
        f = check_cosmo_tfrecord(files[i], o.targets, records[static_cast<size_t>(worker)]);
      else if (kind == Kind::cosmo_npy)
        f = check_cosmo_npy(files[i], o.targets);
      else
        f = check_deepcam(files[i], kind);
    } catch (const Error& e) {
      std::string what = e.what();
      // Messages from the readers start with the path; the report lists the path separately.
      if (starts_with(what, files[i] + ": ")) what = what.substr(files[i].size() + 2);
      f.error = what;
    } catch (const std::exception& e) {
      f.error = e.what();
    }
    progress.advance(1, f.bytes);
  });

  // The expected shape: given, or the most common one among the readable files.
  if (o.sample_shape) {
    r.sample_shape = *o.sample_shape;
  } else {
    std::map<std::string, std::pair<int, Shape>> votes;
    for (const auto& f : facts)
      if (f.error.empty()) {
        auto& v = votes[f.shape.str()];
        ++v.first;
        v.second = f.shape;
      }
    int best = 0;
    for (const auto& [key, v] : votes)
      if (v.first > best) {
        best = v.first;
        r.sample_shape = v.second;
      }
  }
  bool gzip_seen = false;
  for (size_t i = 0; i < files.size(); ++i) {
    FileFacts& f = facts[i];
    if (f.error.empty() && f.shape != r.sample_shape)
      f.error = "sample shape " + f.shape.str() + " differs from the expected " +
                r.sample_shape.str() +
                (o.sample_shape ? " (--sample-shape)" : " (the majority of the files)");
    r.bytes += f.bytes;
    gzip_seen = gzip_seen || f.gzip;
    if (f.error.empty())
      ++r.samples;
    else
      r.errors.emplace_back(files[i], f.error);
  }
  r.files = static_cast<int64_t>(files.size());
  r.format = kind == Kind::cosmo_tfrecord
                 ? (gzip_seen ? "cosmoflow-tfrecord-gzip" : "cosmoflow-tfrecord")
             : kind == Kind::cosmo_npy    ? "cosmoflow-npy"
             : kind == Kind::deepcam_hdf5 ? "deepcam-hdf5"
             : kind == Kind::deepcam_npy  ? "deepcam-npy"
                                          : "deepcam-npy-fused";
  const bool deepcam = kind != Kind::cosmo_tfrecord && kind != Kind::cosmo_npy;
  if (deepcam && has_splits(o.dir) && r.sample_shape.rank() == 3) {
    const std::string stats = (fs::path(o.dir) / "stats.h5").string();
    const std::string problem = check_deepcam_stats(stats, r.sample_shape[2]);
    if (!problem.empty()) r.errors.emplace_back(stats, problem);
  }
  progress.finish();
  r.seconds = progress.elapsed_s();
  log << r.summary() << "\n";
  for (const auto& [file, what] : r.errors) log << "  " << file << ": " << what << "\n";
  return r;
}

}  // namespace crest
