#include "crest/data/datasets/deepcam_files.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>

#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string name_of(const std::string& path) { return fs::path(path).filename().string(); }

// One label value as an int32 class id; `at` is the element index for the message.
template <typename T>
int32_t label_value(T v, const std::string& path, size_t at) {
  const auto fail = [&](const std::string& what) {
    throw_input(path + ": label " + what + " at element " + std::to_string(at) +
                " is not a class id");
  };
  if constexpr (std::is_floating_point_v<T>) {
    if (!(std::trunc(v) == v) || v < -2147483648.0 || v > 2147483647.0)
      fail(std::to_string(static_cast<double>(v)));
  } else {
    if (static_cast<long double>(v) > std::numeric_limits<int32_t>::max() ||
        static_cast<long double>(v) < std::numeric_limits<int32_t>::min())
      fail(std::to_string(v));
  }
  return static_cast<int32_t>(v);
}

template <typename T>
void labels_from(const std::byte* raw, size_t n, const std::string& path, int32_t* out) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw + i * sizeof(T), sizeof(T));
    out[i] = label_value(v, path, i);
  }
}

// label-<id>.npy: [H, W] of any float or integer type numpy writes.
void read_label_npy(const std::string& path, const DeepcamSampleShape& s, int32_t* out) {
  const NpyArray a = read_npy(path);
  if (a.shape != std::vector<int64_t>{s.height, s.width})
    throw_input(path + ": labels are " + std::to_string(a.shape.size()) + "-d with " +
                std::to_string(a.numel()) + " values, expected [" + std::to_string(s.height) +
                ", " + std::to_string(s.width) + "]");
  const auto n = static_cast<size_t>(a.numel());
  const std::byte* raw = a.data.data();
  switch (a.dtype) {
    case NpyDType::f32:
      return labels_from<float>(raw, n, path, out);
    case NpyDType::f64:
      return labels_from<double>(raw, n, path, out);
    case NpyDType::i8:
      return labels_from<int8_t>(raw, n, path, out);
    case NpyDType::i16:
      return labels_from<int16_t>(raw, n, path, out);
    case NpyDType::i32:
      return labels_from<int32_t>(raw, n, path, out);
    case NpyDType::i64:
      return labels_from<int64_t>(raw, n, path, out);
    case NpyDType::u8:
      return labels_from<uint8_t>(raw, n, path, out);
    case NpyDType::u16:
      return labels_from<uint16_t>(raw, n, path, out);
    case NpyDType::u32:
      return labels_from<uint32_t>(raw, n, path, out);
    case NpyDType::u64:
      return labels_from<uint64_t>(raw, n, path, out);
    default:
      throw_input(path + ": labels are " + npy_dtype_name(a.dtype) +
                  ", expected float or integer class ids");
  }
}

// A float32 [H, W, C] array (fused: C includes the label channel).
DeepcamSampleShape npy_data_shape(const std::string& path) {
  const NpyHeader h = read_npy_header(path);
  if (h.dtype != NpyDType::f32 || h.shape.size() != 3)
    throw_input(path + ": array is " + npy_dtype_name(h.dtype) + " of rank " +
                std::to_string(h.shape.size()) + ", expected float32 [H, W, C]");
  return {h.shape[0], h.shape[1], h.shape[2]};
}

void check_shape(const std::string& path, const DeepcamSampleShape& found,
                 const DeepcamSampleShape& expected) {
  if (found != expected)
    throw_input(path + ": sample is " + found.str() + ", expected " + expected.str());
}

void read_fused(const std::string& path, const DeepcamSampleShape& s, float* data,
                int32_t* labels) {
  const int64_t pixels = s.height * s.width, stride = s.channels + 1;
  thread_local std::vector<float> fused;
  fused.resize(static_cast<size_t>(pixels * stride));
  read_npy_into(path, DType::f32, {s.height, s.width, stride}, fused.data());
  for (int64_t p = 0; p < pixels; ++p) {
    const float* px = fused.data() + p * stride;
    if (data) std::memcpy(data + p * s.channels, px, static_cast<size_t>(s.channels) * 4);
    if (labels) labels[p] = label_value(px[s.channels], path, static_cast<size_t>(p));
  }
}

}  // namespace

std::string DeepcamFiles::describe() const {
  if (format == DeepcamFileFormat::hdf5) return "deepcam-hdf5";
  return npy_layout == DeepcamNpyLayout::fused ? "deepcam-npy-fused" : "deepcam-npy";
}

DeepcamFiles list_deepcam_files(const std::string& dir, DeepcamFileFormat format) {
  DeepcamFiles f;
  f.format = format;
  if (format == DeepcamFileFormat::hdf5) {
    f.files = list_sample_files(dir, {".h5"});  // every .h5, as the reference
    return f;
  }
  std::vector<std::string> pairs, fused;
  for (auto& file : list_sample_files(dir, {".npy"})) {
    const std::string name = name_of(file);
    if (starts_with(name, "datalabel-"))
      fused.push_back(std::move(file));
    else if (starts_with(name, "data-"))
      pairs.push_back(std::move(file));
  }
  if (!pairs.empty() && !fused.empty())
    throw_input(dir + ": holds both data-*.npy (" + std::to_string(pairs.size()) +
                ") and datalabel-*.npy (" + std::to_string(fused.size()) +
                ") samples; a split is one layout or the other");
  if (pairs.empty() && fused.empty())
    throw_input(dir + ": no data-*.npy (with label-*.npy) or datalabel-*.npy sample files");
  f.npy_layout = fused.empty() ? DeepcamNpyLayout::pairs : DeepcamNpyLayout::fused;
  f.files = fused.empty() ? std::move(pairs) : std::move(fused);
  return f;
}

std::string deepcam_label_path(const std::string& data_path) {
  const fs::path p(data_path);
  std::string name = p.filename().string();
  if (starts_with(name, "data-")) name = "label-" + name.substr(5);
  return (p.parent_path() / name).string();
}

DeepcamSampleShape probe_deepcam_file(const std::string& path, DeepcamFileFormat format,
                                      DeepcamNpyLayout layout) {
  if (format == DeepcamFileFormat::hdf5) return probe_deepcam_sample(path);
  DeepcamSampleShape s = npy_data_shape(path);
  if (layout == DeepcamNpyLayout::fused) {
    if (s.channels < 2)
      throw_input(path + ": a fused sample holds the data channels and the label, got " +
                  std::to_string(s.channels) + " channel");
    --s.channels;
  }
  return s;
}

void read_deepcam_file(const std::string& path, DeepcamFileFormat format, DeepcamNpyLayout layout,
                       const DeepcamSampleShape& expected, float* data_hwc, int32_t* labels_hw) {
  if (format == DeepcamFileFormat::hdf5)
    return read_deepcam_sample(path, expected, data_hwc, labels_hw);
  check_shape(path, probe_deepcam_file(path, format, layout), expected);
  if (layout == DeepcamNpyLayout::fused) return read_fused(path, expected, data_hwc, labels_hw);
  if (data_hwc)
    read_npy_into(path, DType::f32, {expected.height, expected.width, expected.channels}, data_hwc);
  if (labels_hw) read_label_npy(deepcam_label_path(path), expected, labels_hw);
}

}  // namespace crest

namespace crest {

bool deepcam_reads_windows(DeepcamFileFormat format, DeepcamNpyLayout layout) {
  return format == DeepcamFileFormat::hdf5 || layout == DeepcamNpyLayout::pairs;
}

void read_deepcam_window(const std::string& path, DeepcamFileFormat format, DeepcamNpyLayout layout,
                         const DeepcamSampleShape& expected, const DeepcamWindow& window,
                         float* data_block_hwc, int32_t* labels_hw) {
  if (format == DeepcamFileFormat::hdf5) {
    read_deepcam_data_block(path, expected, window, data_block_hwc);
    if (labels_hw) read_deepcam_sample(path, expected, nullptr, labels_hw);
    return;
  }
  if (layout == DeepcamNpyLayout::pairs) {
    check_shape(path, probe_deepcam_file(path, format, layout), expected);
    read_npy_block_into(path, DType::f32, {expected.height, expected.width, expected.channels},
                        {window.h0, window.w0}, {window.h1, window.w1}, data_block_hwc);
    if (labels_hw) read_label_npy(deepcam_label_path(path), expected, labels_hw);
    return;
  }
  thread_local std::vector<float> whole;
  whole.resize(static_cast<size_t>(expected.height * expected.width * expected.channels));
  read_deepcam_file(path, format, layout, expected, whole.data(), labels_hw);
  const std::vector<int64_t> dims{expected.height, expected.width, expected.channels};
  const std::vector<int64_t> count{window.h1 - window.h0, window.w1 - window.w0, expected.channels};
  box_transfer(whole.data(), BoxAt{dims, {window.h0, window.w0, 0}}, data_block_hwc,
               BoxAt{count, {0, 0, 0}}, count, DType::f32, BoxOp::copy);
}

void read_deepcam_labels(const std::string& path, DeepcamFileFormat format, DeepcamNpyLayout layout,
                         const DeepcamSampleShape& expected, int32_t* labels_hw) {
  CREST_CHECK(deepcam_reads_windows(format, layout), "a fused DeepCAM file's labels alone");
  if (format == DeepcamFileFormat::hdf5)
    return read_deepcam_sample(path, expected, nullptr, labels_hw);
  check_shape(path, probe_deepcam_file(path, format, layout), expected);
  read_label_npy(deepcam_label_path(path), expected, labels_hw);
}

}  // namespace crest
