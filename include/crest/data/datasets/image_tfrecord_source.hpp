// ImageNet as TensorFlow's input pipelines read it: TFRecord shards <dir>/<split>-NNNNN-of-MMMMM
// (build_imagenet_data.py's names: train-00000-of-01024, validation-00000-of-00128), each record a
// tf.train.Example with `image/encoded` (the JPEG file's bytes) and `image/class/label` (int64,
// 1-based: TensorFlow's ImageNet labels keep 0 for "background"; the first class is
// `first_label`). Samples are the records, shard after shard, each transformed as an image
// folder's (crest/data/datasets/image_sample.hpp).
//
// Opening reads every record's 12-byte header (not its data) to learn where the records lie; a
// read is then one pread of one record, its CRCs checked. Shards must be uncompressed (as the
// ImageNet shards are) and complete: a missing shard of the M is an error naming it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/data/datasets/image_sample.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {

struct ImageTfRecordOptions {
  std::string dir;          // holding the shards
  std::string split;        // "train" or "validation": the shards' name prefix
  int64_t limit = 0;        // the first `limit` records in order (0: all)
  int64_t first_label = 1;  // image/class/label of class 0
  ImageTransformOptions transform;
};

// The shards of `split` in `dir`, sorted. Errors (input) name the directory when there are none,
// and a shard missing from the -of-M set or a set with two different M.
std::vector<std::string> image_tfrecord_shards(const std::string& dir, const std::string& split);

// Errors (input) name the shard and record of any framing defect; a record's content (features,
// JPEG) is checked when it is decoded.
std::shared_ptr<SampleSource> open_image_tfrecords(const ImageTfRecordOptions& options);

}  // namespace crest
