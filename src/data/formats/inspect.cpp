#include "crest/data/formats/inspect.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#include "crest/core/error.hpp"
#include "crest/core/units.hpp"
#include "crest/data/formats/crc32c.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/safetensors.hpp"
#include "formats/file_io.hpp"

namespace crest {

namespace {

constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr size_t kShownValues = 8;  // numbers shown per feature

uint64_t load_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex_bytes(const unsigned char* p, size_t n) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    out += (i ? " " : "") + std::string(buf);
  }
  return out;
}

std::string bytes_text(uint64_t n) {
  return with_thousands(static_cast<int64_t>(n)) + (n == 1 ? " byte" : " bytes");
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", v);
  return buf;
}

template <typename T>
std::string values_text(const std::vector<T>& values) {
  std::string out = "[";
  for (size_t i = 0; i < std::min(values.size(), kShownValues); ++i)
    out += (i ? ", " : "") + number_text(static_cast<double>(values[i]));
  return out + (values.size() > kShownValues ? ", ...]" : "]");
}

std::string count_text(size_t n, const char* what) {
  return with_thousands(static_cast<int64_t>(n)) + " " + what + (n == 1 ? "" : "s");
}

std::string describe_example(const ExampleView& ex) {
  std::string out;
  size_t width = 0;
  for (const auto& name : ex.names()) width = std::max(width, name.size());
  for (const auto& name : ex.names()) {
    const ExampleFeature& f = *ex.find(name);
    out += "  " + name + std::string(width + 2 - name.size(), ' ') + example_kind_name(f.kind);
    switch (f.kind) {
      case ExampleFeature::Kind::bytes: {
        uint64_t total = 0;
        for (const auto& b : f.bytes) total += b.size();
        out += ", " + count_text(f.bytes.size(), "value") + ", " + bytes_text(total);
        break;
      }
      case ExampleFeature::Kind::floats:
        out += ", " + count_text(f.floats.size(), "value") + ": " + values_text(f.floats);
        break;
      case ExampleFeature::Kind::int64s:
        out += ", " + count_text(f.int64s.size(), "value") + ": " + values_text(f.int64s);
        break;
      case ExampleFeature::Kind::none:
        break;
    }
    out += "\n";
  }
  return out;
}

std::string inspect_tfrecord(const std::string& path, uint64_t file_bytes) {
  TfRecordReader reader(path, TfRecordCompression::detect);
  std::vector<std::byte> record, first;
  uint64_t payload = 0;
  while (reader.next(record)) {
    if (reader.records_read() == 1) first = record;
    payload += record.size();
  }
  const bool gzip = reader.compression() == TfRecordCompression::gzip;
  std::string out = path + ": TFRecord, " + (gzip ? "GZIP-compressed" : "uncompressed") + ", " +
                    bytes_text(file_bytes) + " on disk\n";
  out += "records: " + with_thousands(static_cast<int64_t>(reader.records_read())) + " (" +
         bytes_text(payload) + " of record data" +
         (gzip ? ", " + bytes_text(reader.offset()) + " uncompressed" : "") +
         "; all CRCs verified)\n";
  if (reader.records_read() == 0) return out;
  out += "record 0: " + bytes_text(first.size());
  try {
    const ExampleView ex = ExampleView::parse(first, path + ": record 0");
    out += ", tf.train.Example with " + count_text(ex.size(), "feature") + "\n";
    out += describe_example(ex);
  } catch (const Error& e) {
    out += ", not a tf.train.Example (" + std::string(e.what()) + ")\n";
  }
  return out;
}

std::string inspect_npy(const std::string& path) {
  const NpyHeader h = read_npy_header(path);
  std::string out = path + ": NumPy .npy, format " + std::to_string(h.version_major) + "." +
                    std::to_string(h.version_minor) + "\n";
  out += std::string("dtype: ") + npy_dtype_name(h.dtype) + " ('" + h.descr + "'" +
         (h.big_endian ? ", big-endian" : "") + ")\n";
  out += "shape: " + (h.shape.empty() ? std::string("scalar") : shape_text(h.shape)) + ", " +
         with_thousands(h.numel()) + (h.numel() == 1 ? " element" : " elements") + ", " +
         bytes_text(h.data_bytes) + (h.fortran_order ? ", Fortran order" : ", C order") + "\n";
  return out;
}

std::string inspect_safetensors(const std::string& path) {
  const SafetensorsFile f(path);
  std::string out = path + ": safetensors, " + count_text(f.tensors().size(), "tensor") + "\n";
  size_t width = 0;
  for (const auto& t : f.tensors()) width = std::max(width, t.name.size());
  for (const auto& t : f.tensors())
    out += "  " + t.name + std::string(width + 2 - t.name.size(), ' ') +
           safetensors_dtype_name(t.dtype) + " " + shape_text(t.shape) + ", " +
           bytes_text(t.bytes) + "\n";
  if (!f.metadata().empty()) {
    out += "metadata:\n";
    for (const auto& [k, v] : f.metadata())
      out += "  " + k + " = " + (v.size() > 200 ? v.substr(0, 200) + "..." : v) + "\n";
  }
  return out;
}

}  // namespace

const char* data_file_format_name(DataFileFormat f) {
  switch (f) {
    case DataFileFormat::tfrecord:
      return "TFRecord";
    case DataFileFormat::tfrecord_gzip:
      return "TFRecord (GZIP)";
    case DataFileFormat::hdf5:
      return "HDF5";
    case DataFileFormat::npy:
      return "NumPy .npy";
    case DataFileFormat::safetensors:
      return "safetensors";
  }
  return "?";
}

DataFileFormat detect_data_file_format(const std::string& path) {
  const formats_io::InputFile file(path);
  const uint64_t size = file.size();
  if (size == 0) throw_input(path + ": empty file, not a data file");
  std::array<unsigned char, 16> head{};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(size, head.size()));
  file.read_exact_at(0, head.data(), n, "the format probe");

  // A plain TFRecord is recognised by its length CRC first: the odds that another format's
  // first 12 bytes pass it are 2^-32, while a TFRecord's first bytes can look like others'
  // (a length starting 1f 8b, a length CRC starting with '{', an HDF5 file inside a record).
  if (n >= 12 && crc32c_mask(crc32c(head.data(), 8)) == load_le(head.data() + 8, 4))
    return DataFileFormat::tfrecord;
  if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b) return DataFileFormat::tfrecord_gzip;
  if (n >= 6 && std::memcmp(head.data(), "\x93NUMPY", 6) == 0) return DataFileFormat::npy;
  // HDF5 allows a user block before the superblock: the signature sits at 0, 512, 1024, ...
  for (uint64_t at = 0; at + 8 <= size; at = at ? at * 2 : 512) {
    unsigned char sig[8];
    file.read_exact_at(at, sig, 8, "the HDF5 signature probe");
    if (std::memcmp(sig, kHdf5Signature, 8) == 0) return DataFileFormat::hdf5;
  }
  if (n >= 9) {
    const uint64_t header = load_le(head.data(), 8);
    if (header >= 2 && header <= size - 8 && head[8] == '{') return DataFileFormat::safetensors;
  }
  throw_input(path + ": unknown format: not TFRecord, HDF5, .npy or safetensors (first bytes: " +
              hex_bytes(head.data(), std::min<size_t>(n, 12)) + ")");
}

std::string inspect_file(const std::string& path) {
  const DataFileFormat format = detect_data_file_format(path);
  switch (format) {
    case DataFileFormat::tfrecord:
    case DataFileFormat::tfrecord_gzip: {
      const uint64_t size = formats_io::InputFile(path).size();
      return inspect_tfrecord(path, size);
    }
    case DataFileFormat::hdf5:
      return path + ": HDF5\n" + describe_hdf5(path);
    case DataFileFormat::npy:
      return inspect_npy(path);
    case DataFileFormat::safetensors:
      return inspect_safetensors(path);
  }
  throw_runtime("internal error: unhandled data file format");
}

}  // namespace crest
