// Softmax cross-entropy over plain [n, classes, spatial] float32 logits (crest::VectorOps's
// softmax_cross_entropy on the onednn backend), compiled for the machine's widest vectors: eight
// positions at a time in double precision, with double_lanes.hpp's exp and log.
#pragma once
#include <cstddef>
#include <cstdint>

namespace crest::onednn {

struct CrossEntropyProblem {
  const float* logits = nullptr;
  const int32_t* labels = nullptr;       // [n, spatial], each in [0, classes): checked before
  const float* class_weights = nullptr;  // [classes], or null for all 1
  float* diff = nullptr;                 // d loss / d logits, or null for the loss only
  int64_t n = 0, classes = 0, spatial = 0;
  double diff_scale = 1.0;
  double label_smoothing = 0.0;  // e: the target is (1 - e) onehot(label) + e / classes
};

// The sum over all n * spatial positions of weight[label] * sum_c q_c * -log softmax[c] with the
// smoothed target q (e = 0: weight[label] * -log softmax[label]), and, where `diff` is set,
// diff = diff_scale * weight[label] / (n * spatial) * (softmax - q).
// The positions are split into the fixed chunks of update_loops.hpp and the chunk sums added in
// order: the same bits for every thread count.
double cross_entropy_loop(const CrossEntropyProblem& p);

}  // namespace crest::onednn
