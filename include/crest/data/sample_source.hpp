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

// One block of every sample's x under a spatial split (docs/distributed.md, "Spatial split"):
// rows [begin[a], end[a]) of each spatial axis a of the channels-last x ([D, H, W, C]: the axes
// before the channels); the channels are whole.
struct SampleBlock {
  std::vector<int64_t> begin, end;
  Shape x_shape(const Shape& whole) const;  // the block's [rows per axis..., C]
};

// Where a sample's random transform draws from (a training image's crop and flip): the run's data
// seed and the epoch, so each epoch draws anew and a resumed run draws what the straight run did,
// whichever thread decodes the sample.
struct SampleDraw {
  uint64_t seed = 0;
  int64_t epoch = 0;
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual std::string format() const = 0;  // "cosmoflow-tfrecord", "deepcam-hdf5", ...
  virtual const SampleSpec& spec() const = 0;
  virtual int64_t size() const = 0;
  virtual const std::string& path(int64_t i) const = 0;  // the file of sample i (for messages)
  // The classes integer labels index, where the files name them (an image folder's class
  // directories, in label order); empty otherwise.
  virtual std::vector<std::string> class_names() const { return {}; }
  // Reads sample i's payload: file I/O and decompression, nothing that depends on the model.
  // Throws crest::Error (input) naming the file on any defect. Thread-safe.
  virtual void read(int64_t i, std::vector<std::byte>& payload) const = 0;
  // Parses and checks `payload` of sample i and writes the transformed sample into x
  // (spec().x_bytes()) and y (spec().y_bytes()). Throws crest::Error (input) naming the file.
  // Thread-safe.
  virtual void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const = 0;
  // decode() with the draw of a random transform; a source without one (the default) ignores it.
  virtual void decode_drawn(int64_t i, std::span<const std::byte> payload, float* x, void* y,
                            const SampleDraw& /*draw*/) const {
    decode(i, payload, x, y);
  }

  // One block of each sample (a spatial split's). A source whose format allows it reads only the
  // block's bytes (reads_blocks(): npy files, one read per contiguous run of rows); the default
  // reads the whole payload (a GZIP TFRecord is inflated whole) and decodes the whole sample
  // before keeping its block, with `draw` (a random transform's: an image's crop and flip are
  // drawn on the whole sample). x gets block.x_shape(spec().x_shape); y is whole.
  virtual bool reads_blocks() const { return false; }
  virtual void read_block(int64_t i, const SampleBlock& /*block*/,
                          std::vector<std::byte>& payload) const {
    read(i, payload);
  }
  virtual void decode_block(int64_t i, const SampleBlock& block, std::span<const std::byte> payload,
                            float* x, void* y, const SampleDraw& draw) const;

  // The targets alone (a pipeline's last stage feeds no samples). A source whose format allows it
  // reads only what the targets need (reads_targets_alone(): an image folder reads nothing, its
  // labels are its class directories); the default reads the whole payload. decode_targets
  // writes y (spec().y_bytes()) alone: the default decodes the whole sample with `draw` and keeps
  // y (a random transform may move the targets with the sample); a source whose targets do not
  // depend on the sample's decoding parses them alone (a TFRecord's label feature, without its
  // JPEG or volume).
  virtual bool reads_targets_alone() const { return false; }
  virtual void read_targets(int64_t i, std::vector<std::byte>& payload) const { read(i, payload); }
  virtual void decode_targets(int64_t i, std::span<const std::byte> payload, void* y,
                              const SampleDraw& draw) const;
};

// `whole` restricted to `block` of every sample: its spec's x_shape is the block's, and read and
// decode go to read_block and decode_block. Throws crest::Error (usage) naming the block when it
// does not fit the samples.
std::shared_ptr<SampleSource> block_of_samples(std::shared_ptr<const SampleSource> whole,
                                               SampleBlock block);

// `whole`'s targets alone: its spec's x_shape is [0] (a batch holds no sample bytes), and read
// and decode go to read_targets and decode_targets.
std::shared_ptr<SampleSource> targets_of_samples(std::shared_ptr<const SampleSource> whole);

// The sorted list of regular files in `dir` whose names end with one of `suffixes`. Errors (input)
// when the directory is missing, unreadable or holds no such file, naming it and the suffixes.
std::vector<std::string> list_sample_files(const std::string& dir,
                                           const std::vector<std::string>& suffixes);

}  // namespace crest
