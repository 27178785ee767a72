// The metrics the registry holds (metrics.cpp), one family per file.
#pragma once
#include "crest/train/metric.hpp"

namespace crest {

// mean_absolute_error (mae) and mean_squared_error (mse): element-wise regression metrics.
Metric make_mae_metric();
Metric make_mse_metric();
// iou: DeepCAM's segmentation score (iou_metric.cpp).
Metric make_iou_metric();

}  // namespace crest
