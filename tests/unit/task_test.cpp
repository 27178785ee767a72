// The task layer of the trainer: metrics, the quality target and early stopping, and what a
// config's task is made of.
#include "crest/train/task.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/test_util.hpp"
#include "train/stop_rules.hpp"

namespace crest {
namespace {

Config demo_config(const std::vector<std::string>& overrides = {}) {
  return load_config(test::source_path("configs/cosmoflow-demo.yaml"), overrides);
}

template <typename T>
TensorView view(std::vector<T>& v, DType dtype) {
  return TensorView(v.data(), {Shape{static_cast<int64_t>(v.size())}, dtype});
}

double metric_over(const Metric& m, const std::vector<std::pair<TensorView, TensorView>>& batches) {
  std::vector<double> sums(static_cast<size_t>(m.sums), 0.0);
  for (const auto& [pred, target] : batches) m.accumulate(pred, target, sums.data());
  return m.value(sums.data());
}

TEST(Metrics, MaeAndMseAreExactMeansOverEveryBatchAndMixedDtypes) {
  std::vector<float> p1{1, 2, 3}, t1{0, 2, 5};
  std::vector<double> p2{-1}, t2{1};  // a float64 prediction against...
  std::vector<float> t2f{1};          // ...a float32 target (a float64 oracle model)
  const Metric& mae = find_metric("mean_absolute_error", "test");
  const Metric& mse = find_metric("mse", "test");
  EXPECT_EQ(mae.short_name, "mae");
  const std::vector<std::pair<TensorView, TensorView>> batches{
      {view(p1, DType::f32), view(t1, DType::f32)}, {view(p2, DType::f64), view(t2, DType::f64)}};
  EXPECT_DOUBLE_EQ(metric_over(mae, batches), (1 + 0 + 2 + 2) / 4.0);
  EXPECT_DOUBLE_EQ(metric_over(mse, batches), (1 + 0 + 4 + 4) / 4.0);
  EXPECT_DOUBLE_EQ(metric_over(mae, {{view(p2, DType::f64), view(t2f, DType::f32)}}), 2.0);
}

TEST(Metrics, AnUnknownMetricNamesTheKeyAndTheKnownOnes) {
  try {
    find_metric("accuracy", "train.metrics[1]");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train.metrics[1]"), std::string::npos) << what;
    EXPECT_NE(what.find("accuracy"), std::string::npos) << what;
    EXPECT_NE(what.find("mean_absolute_error"), std::string::npos) << what;
  }
}

TEST(Task, CosmoFlowIsItsModelItsMetricsAndTheMaeTarget) {
  const Task plain = make_task(demo_config());
  EXPECT_EQ(plain.name, "cosmoflow");
  ASSERT_EQ(plain.metrics.size(), 1u);
  EXPECT_EQ(plain.metrics[0]->name, "mean_absolute_error");
  EXPECT_FALSE(plain.target);
  EXPECT_EQ(plain.quality_metric(), plain.metrics[0]);
  EXPECT_GE(plain.model.prediction, 0);
  EXPECT_GE(plain.model.loss, 0);

  // A target on MAE measures MAE even when the metrics leave it out, and leads with it.
  const Task t =
      make_task(demo_config({"train.metrics=[mean_squared_error]", "train.target_mae=0.2"}));
  ASSERT_EQ(t.metrics.size(), 2u);
  EXPECT_EQ(t.metrics[0]->short_name, "mae");
  EXPECT_EQ(t.metrics[1]->short_name, "mse");
  ASSERT_TRUE(t.target);
  EXPECT_EQ(t.target->metric, t.metrics[0]);
  EXPECT_TRUE(t.target->reached(0.2));
  EXPECT_FALSE(t.target->reached(0.2000001));
  EXPECT_EQ(t.target->describe(0.19), "val_mae 0.1900 <= 0.2");
}

EpochStats validated_epoch(int epoch, double val_loss, double mae) {
  EpochStats st;
  st.epoch = epoch;
  st.validated = true;
  st.val_loss = val_loss;
  st.val_metrics = {{"mae", mae}};
  return st;
}

TEST(StopRules, TheTargetStopsARunAsASuccess) {
  const StopRules rules(make_task(demo_config({"train.target_mae=0.3"})), std::nullopt);
  TrainingPosition pos;
  EXPECT_FALSE(rules.after_epoch(validated_epoch(1, 1.0, 0.31), pos).stop);
  EpochStats unvalidated;
  EXPECT_FALSE(rules.after_epoch(unvalidated, pos).stop);
  const StopDecision d = rules.after_epoch(validated_epoch(2, 1.0, 0.3), pos);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.status, "success");
  EXPECT_NE(d.message.find("target reached: val_mae 0.3000 <= 0.3"), std::string::npos);
  EXPECT_EQ(rules.status_after_last_epoch(), "aborted");  // all epochs, target never reached
}

TEST(StopRules, EarlyStoppingCountsEpochsWithoutABetterValidationLoss) {
  const StopRules with_target(make_task(demo_config({"train.target_mae=0.01"})), 2);
  const StopRules without(make_task(demo_config()), 2);
  TrainingPosition a, b;
  for (const StopRules* r : {&with_target, &without}) {
    TrainingPosition& pos = r == &with_target ? a : b;
    EXPECT_FALSE(r->after_epoch(validated_epoch(1, 1.0, 0.5), pos).stop);
    EXPECT_FALSE(r->after_epoch(validated_epoch(2, 0.5, 0.5), pos).stop);  // better: count reset
    EXPECT_EQ(pos.best_val_loss, 0.5);
    EXPECT_FALSE(r->after_epoch(validated_epoch(3, 0.5, 0.5), pos).stop);  // equal is not better
    EXPECT_EQ(pos.epochs_since_best, 1);
  }
  const StopDecision d = with_target.after_epoch(validated_epoch(4, 0.6, 0.5), a);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.status, "aborted");  // stopped without reaching the target
  EXPECT_NE(d.message.find("has not improved for 2 epochs"), std::string::npos) << d.message;
  EXPECT_EQ(without.after_epoch(validated_epoch(4, 0.6, 0.5), b).status, "success");
  EXPECT_EQ(without.status_after_last_epoch(), "success");
}

}  // namespace
}  // namespace crest
