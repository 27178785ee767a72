// SampleSource: one split (train or validation) of a dataset on disk, as the loader sees it — a
// sorted list of sample files, a way to read one file's payload (I/O and decompression: the part
// worth caching) and a way to decode that payload into a batch slot (parse, check, transform).
// One sample per file, as in the reference datasets.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "crest/core/shape.hpp"

namespace crest {

// What one decoded sample looks like in a batch slot.
struct SampleSpec {
  Shape x_shape;           // channels last, as in the files: [D, H, W, C] or [H, W, C]; float32
  Shape y_shape;           // [targets] (float32) or [H, W] class labels (int32)
  bool y_integer = false;  // int32 labels instead of float32 targets

  size_t x_bytes() const { return static_cast<size_t>(x_shape.numel()) * 4; }
  size_t y_bytes() const { return static_cast<size_t>(y_shape.numel()) * 4; }
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual std::string format() const = 0;  // "cosmoflow-tfrecord", "deepcam-hdf5", ...
  virtual const SampleSpec& spec() const = 0;
  virtual int64_t size() const = 0;
  virtual const std::string& path(int64_t i) const = 0;  // the file of sample i (for messages)
  // Reads sample i's payload: file I/O and decompression, nothing that depends on the model.
  // Throws crest::Error (input) naming the file on any defect. Thread-safe.
  virtual void read(int64_t i, std::vector<std::byte>& payload) const = 0;
  // Parses and checks `payload` of sample i and writes the transformed sample into x
  // (spec().x_bytes()) and y (spec().y_bytes()). Throws crest::Error (input) naming the file.
  // Thread-safe.
  virtual void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const = 0;
};

// The sorted list of regular files in `dir` whose names end with one of `suffixes`. Errors (input)
// when the directory is missing, unreadable or holds no such file, naming it and the suffixes.
std::vector<std::string> list_sample_files(const std::string& dir,
                                           const std::vector<std::string>& suffixes);

}  // namespace crest
