// The rows crest predict writes, one per sample: which columns a task gets, and how one sample's
// prediction and target become a row. A regression model (CosmoFlow) gets its prediction and
// target as float32; a segmentation model (DeepCAM: class scores [C, H, W] against int32 labels
// [H, W]) gets the class mask (uint8, compressed) and optionally the class probabilities
// (float16); a classifier (ResNet-50: scores [K] against one int32 label) gets the predicted
// class and the label (int64) and optionally the probabilities [K]. Every task gets the source
// file, the sample's index in its split, and each metric of the task on that sample alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "crest/core/tensor.hpp"
#include "crest/data/formats/prediction_file.hpp"
#include "crest/train/task.hpp"

namespace crest {

class PredictionRows {
 public:
  // `pred` and `target`: the compiled batch's prediction and target descriptions (batch first);
  // `text_bytes`: the longest source path of the split.
  PredictionRows(const Task& task, const TensorDesc& pred, const TensorDesc& target,
                 size_t text_bytes, bool probabilities);

  const std::vector<ColumnSpec>& columns() const { return columns_; }
  bool segmentation() const { return segmentation_; }
  // Fills the row of place `place` of a batch; `metric_sums` (sums of every task metric, in
  // order, Metric::sums each) gets the sample's sums added. Returns the row's column pointers,
  // valid until the next call.
  const std::vector<const void*>& row(const TensorView& pred, const TensorView& target,
                                      int64_t place, const std::string& source_file,
                                      int64_t sample_index, std::vector<double>& metric_sums);

 private:
  void fill_segmentation(const float* scores, size_t column);
  void fill_classification(const float* scores, int32_t label, size_t column);
  const Task& task_;
  bool segmentation_ = false, classification_ = false, probabilities_ = false;
  int64_t classes_ = 0, pixels_ = 0;
  std::vector<ColumnSpec> columns_;
  std::vector<std::vector<unsigned char>> buffers_;  // one row per column
  std::vector<const void*> pointers_;
  std::vector<double> sample_sums_;
};

}  // namespace crest
