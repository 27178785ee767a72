#include "prediction_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"

namespace crest {
namespace {

std::vector<int64_t> per_sample(const TensorDesc& d) { return d.shape.without_batch().to_vector(); }

// Place `place` of a batch-first view, as a batch of one.
TensorView place_of(const TensorView& t, int64_t place) {
  TensorDesc d = t.desc();
  d.shape = t.shape().without_batch().with_batch(1);
  const size_t bytes = t.bytes() / static_cast<size_t>(t.shape()[0]);
  return TensorView(static_cast<char*>(t.data()) + static_cast<size_t>(place) * bytes, d);
}

// "val_mae" -> "mae": a row's metric is of one sample, not of the validation split.
std::string column_name_of(const Metric& m) {
  const std::string& s = m.short_name;
  return s.starts_with("val_") ? s.substr(4) : s;
}

}  // namespace

PredictionRows::PredictionRows(const Task& task, const TensorDesc& pred, const TensorDesc& target,
                               size_t text_bytes, bool probabilities)
    : task_(task), probabilities_(probabilities) {
  const std::vector<int64_t> p = per_sample(pred), t = per_sample(target);
  classification_ = target.dtype == DType::i32 && t.empty() && p.size() == 1;
  segmentation_ = target.dtype == DType::i32 && !t.empty() && p.size() == t.size() + 1 &&
                  std::equal(t.begin(), t.end(), p.begin() + 1);
  if (probabilities && !segmentation_ && !classification_)
    throw_usage(
        "--probabilities needs a classifier or a segmentation model (class scores "
        "against labels)");
  columns_.push_back({"source_file", ColumnType::text, {}, std::max<size_t>(text_bytes, 1), false});
  columns_.push_back({"sample_index", ColumnType::i64, {}, 0, false});
  if (classification_) {
    classes_ = p[0];
    columns_.push_back({"class", ColumnType::i64, {}, 0, false});
    columns_.push_back({"label", ColumnType::i64, {}, 0, false});
    if (probabilities) columns_.push_back({"probabilities", ColumnType::f16, p, 0, false});
  } else if (segmentation_) {
    classes_ = p[0];
    pixels_ = numel_of(t);
    if (classes_ > 255) throw_usage("a uint8 class mask holds at most 255 classes");
    columns_.push_back({"mask", ColumnType::u8, t, 0, true});
    if (probabilities) columns_.push_back({"probabilities", ColumnType::f16, p, 0, true});
  } else {
    columns_.push_back({"prediction", ColumnType::f32, p, 0, false});
    columns_.push_back({"target", ColumnType::f32, t, 0, false});
  }
  for (const Metric* m : task.metrics)
    columns_.push_back({column_name_of(*m), ColumnType::f32, {}, 0, false});
  for (const ColumnSpec& c : columns_) buffers_.emplace_back(c.row_bytes());
  pointers_.resize(columns_.size());
  for (size_t k = 0; k < columns_.size(); ++k) pointers_[k] = buffers_[k].data();
}

// The class with the highest score per pixel, and (optionally) the softmax over the classes.
void PredictionRows::fill_segmentation(const float* scores, size_t column) {
  auto* mask = buffers_[column].data();
  auto* probs = probabilities_ ? reinterpret_cast<uint16_t*>(buffers_[column + 1].data()) : nullptr;
  for (int64_t i = 0; i < pixels_; ++i) {
    int64_t best = 0;
    float top = scores[i];
    for (int64_t c = 1; c < classes_; ++c) {
      if (scores[c * pixels_ + i] <= top) continue;
      top = scores[c * pixels_ + i];
      best = c;
    }
    mask[i] = static_cast<unsigned char>(best);
    if (!probs) continue;
    double total = 0;
    for (int64_t c = 0; c < classes_; ++c) total += std::exp(scores[c * pixels_ + i] - top);
    for (int64_t c = 0; c < classes_; ++c)
      probs[c * pixels_ + i] =
          float_to_fp16(static_cast<float>(std::exp(scores[c * pixels_ + i] - top) / total));
  }
}

// The class with the highest score as top1_accuracy ranks them (the first of equals; a NaN above
// every number), the label, and (optionally) the softmax over the classes.
void PredictionRows::fill_classification(const float* scores, int32_t label, size_t column) {
  int64_t best = 0;
  for (int64_t c = 1; c < classes_ && !std::isnan(scores[best]); ++c)
    if (std::isnan(scores[c]) || scores[c] > scores[best]) best = c;
  const int64_t label64 = label;
  std::memcpy(buffers_[column].data(), &best, sizeof best);
  std::memcpy(buffers_[column + 1].data(), &label64, sizeof label64);
  if (!probabilities_) return;
  auto* probs = reinterpret_cast<uint16_t*>(buffers_[column + 2].data());
  double total = 0;
  for (int64_t c = 0; c < classes_; ++c) total += std::exp(scores[c] - scores[best]);
  for (int64_t c = 0; c < classes_; ++c)
    probs[c] = float_to_fp16(static_cast<float>(std::exp(scores[c] - scores[best]) / total));
}

const std::vector<const void*>& PredictionRows::row(const TensorView& pred,
                                                    const TensorView& target, int64_t place,
                                                    const std::string& source_file,
                                                    int64_t sample_index,
                                                    std::vector<double>& metric_sums) {
  std::vector<unsigned char>& text = buffers_[0];
  std::fill(text.begin(), text.end(), 0);
  std::memcpy(text.data(), source_file.data(), std::min(text.size(), source_file.size()));
  std::memcpy(buffers_[1].data(), &sample_index, sizeof sample_index);
  const TensorView p = place_of(pred, place), t = place_of(target, place);
  if (classification_) {
    fill_classification(static_cast<const float*>(p.data()), *static_cast<const int32_t*>(t.data()),
                        2);
  } else if (segmentation_) {
    fill_segmentation(static_cast<const float*>(p.data()), 2);
  } else {
    std::memcpy(buffers_[2].data(), p.data(), buffers_[2].size());
    std::memcpy(buffers_[3].data(), t.data(), buffers_[3].size());
  }
  size_t column = columns_.size() - task_.metrics.size(), at = 0;
  for (const Metric* m : task_.metrics) {
    sample_sums_.assign(static_cast<size_t>(m->sums), 0.0);
    m->accumulate(p, t, sample_sums_.data());
    for (int k = 0; k < m->sums; ++k)
      metric_sums[at + static_cast<size_t>(k)] += sample_sums_[static_cast<size_t>(k)];
    const auto value = static_cast<float>(m->value(sample_sums_.data()));
    std::memcpy(buffers_[column++].data(), &value, sizeof value);
    at += static_cast<size_t>(m->sums);
  }
  return pointers_;
}

}  // namespace crest
