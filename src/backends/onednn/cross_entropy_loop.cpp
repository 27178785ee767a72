#include "onednn/cross_entropy_loop.hpp"

#include <algorithm>
#include <cmath>

#include "onednn/double_lanes.hpp"
#include "onednn/update_loops.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn {

namespace {

using double_lanes::Doubles;
using double_lanes::Int64s;
using double_lanes::kLanes;

// Classes held in registers per group of positions; more go one position at a time.
constexpr int64_t kMaxClasses = 16;

// One position q = b * spatial + s, whose class c sits at (b * classes + c) * spatial + s. Each
// class's exponential is computed once and serves both the sum and the gradient.
[[gnu::always_inline]] inline double one_position(const CrossEntropyProblem& p, int64_t b,
                                                  int64_t s, size_t q) {
  const float* x = p.logits + b * p.classes * p.spatial + s;
  const int32_t label = p.labels[q];
  double max_logit = x[0];
  for (int64_t c = 1; c < p.classes; ++c)
    max_logit = std::max(max_logit, static_cast<double>(x[c * p.spatial]));
  double sum_exp = 0.0;
  for (int64_t c = 0; c < p.classes; ++c)
    sum_exp += std::exp(static_cast<double>(x[c * p.spatial]) - max_logit);
  const double weight = p.class_weights ? static_cast<double>(p.class_weights[label]) : 1.0;
  const double smooth = p.label_smoothing, spread = smooth / static_cast<double>(p.classes);
  if (p.diff != nullptr) {
    float* dx = p.diff + b * p.classes * p.spatial + s;
    const double scale = p.diff_scale * weight / static_cast<double>(p.n * p.spatial);
    const double inverse_sum = 1.0 / sum_exp;
    for (int64_t c = 0; c < p.classes; ++c) {
      const double softmax =
          std::exp(static_cast<double>(x[c * p.spatial]) - max_logit) * inverse_sum;
      const double target = (c == label ? 1.0 - smooth : 0.0) + spread;
      dx[c * p.spatial] = static_cast<float>(scale * (softmax - target));
    }
  }
  // sum_c q_c (lse - z_c) = lse - (1 - e) z_label - e/C sum_c z_c
  double target_logit = x[label * p.spatial];
  if (smooth > 0) {
    double logit_sum = 0.0;
    for (int64_t c = 0; c < p.classes; ++c) logit_sum += static_cast<double>(x[c * p.spatial]);
    target_logit = (1 - smooth) * target_logit + spread * logit_sum;
  }
  return weight * (max_logit + std::log(sum_exp) - target_logit);
}

// Positions s .. s + 7 of sample b (q the first's index): the same arithmetic as one_position,
// lane by lane, with double_lanes' exp and log.
[[gnu::always_inline]] inline Doubles eight_positions(const CrossEntropyProblem& p, int64_t b,
                                                      int64_t s, size_t q) {
  const float* x = p.logits + b * p.classes * p.spatial + s;
  Doubles logit[kMaxClasses];
  Doubles max_logit = double_lanes::widened(x);
  for (int64_t c = 0; c < p.classes; ++c) {
    logit[c] = double_lanes::widened(x + c * p.spatial);
    max_logit = logit[c] > max_logit ? logit[c] : max_logit;
  }
  Doubles e[kMaxClasses], sum_exp = {};
  for (int64_t c = 0; c < p.classes; ++c) {
    e[c] = double_lanes::exp(logit[c] - max_logit);
    sum_exp += e[c];
  }
  Doubles weight, label_logit;
  Int64s label;
  for (int64_t l = 0; l < kLanes; ++l) {
    label[l] = p.labels[q + static_cast<size_t>(l)];
    weight[l] = p.class_weights ? static_cast<double>(p.class_weights[label[l]]) : 1.0;
    label_logit[l] = x[label[l] * p.spatial + l];
  }
  const double smooth = p.label_smoothing, spread = smooth / static_cast<double>(p.classes);
  if (p.diff != nullptr) {
    float* dx = p.diff + b * p.classes * p.spatial + s;
    const Doubles scale = p.diff_scale * weight / static_cast<double>(p.n * p.spatial);
    const Doubles inverse_sum = 1.0 / sum_exp;
    for (int64_t c = 0; c < p.classes; ++c) {
      const Doubles target = (label == c ? Doubles{} + (1.0 - smooth) : Doubles{}) + spread;
      double_lanes::store_narrowed(dx + c * p.spatial, scale * (e[c] * inverse_sum - target));
    }
  }
  Doubles target_logit = label_logit;
  if (smooth > 0) {  // as one_position: (1 - e) z_label + e/C sum_c z_c
    Doubles logit_sum = {};
    for (int64_t c = 0; c < p.classes; ++c) logit_sum += logit[c];
    target_logit = (1 - smooth) * label_logit + spread * logit_sum;
  }
  return weight * (max_logit + double_lanes::log(sum_exp) - target_logit);
}

// Positions [lo, hi): groups of eight inside one sample, the rest one by one. The eight lanes'
// sums are added in a fixed order at the end.
[[gnu::always_inline]] inline double chunk(const CrossEntropyProblem& p, size_t lo, size_t hi) {
  const auto spatial = static_cast<size_t>(p.spatial);
  Doubles lanes = {};
  double rest = 0.0;
  size_t q = lo;
  while (q < hi) {
    const size_t b = q / spatial, s = q % spatial;
    if (p.classes <= kMaxClasses && q + kLanes <= hi && s + kLanes <= spatial) {
      lanes += eight_positions(p, static_cast<int64_t>(b), static_cast<int64_t>(s), q);
      q += kLanes;
    } else {
      rest += one_position(p, static_cast<int64_t>(b), static_cast<int64_t>(s), q);
      ++q;
    }
  }
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
         ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7])) + rest;
}

}  // namespace

namespace {
#define CREST_WIDEST_VECTORS_LOOPS "onednn/cross_entropy_loop.inc"
#include "widest_vectors_expand.hpp"
}  // namespace

double cross_entropy_loop(const CrossEntropyProblem& p) {
  return CREST_WIDEST_VECTORS_CALL(cross_entropy_loop, p);
}

}  // namespace crest::onednn
