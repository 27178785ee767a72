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

// A DeepCAM task as a graph: 3 class scores against int32 labels, judged by IoU.
Config deepcam_config(const std::vector<std::string>& overrides = {}) {
  return load_config_text(R"(data: {name: deepcam, data_dir: /d, sample_shape: [16, 32, 16],
       channels: [1, 2], batch_size: 2, n_epochs: 1}
model:
  name: graph
  inputs:
    - {name: fields, shape: [2, 16, 32], layout: channels_last}
    - {name: labels, shape: [16, 32], integer: true}
  layers:
    - {name: logits, kind: conv, out_channels: 3, kernel: [1, 1]}
    - {name: ce, kind: softmax_cross_entropy, inputs: [logits, labels]}
  outputs: [logits]
  loss: ce
optimizer: {name: Adam}
)",
                          "deepcam.yaml", overrides);
}

TEST(Task, DeepcamIsJudgedByIouAndStopsWhenItReachesTheTargetFromBelow) {
  const Task plain = make_task(deepcam_config());
  EXPECT_EQ(plain.model.sample_input, "fields");
  EXPECT_EQ(plain.model.target_input, "labels");
  ASSERT_EQ(plain.metrics.size(), 1u);
  EXPECT_EQ(plain.metrics[0]->name, "iou");
  EXPECT_FALSE(plain.target);

  const Task t = make_task(deepcam_config({"train.target_iou=0.82"}));
  ASSERT_TRUE(t.target);
  EXPECT_EQ(t.target->metric->name, "iou");
  EXPECT_TRUE(t.target->reached(0.82));
  EXPECT_FALSE(t.target->reached(0.8199));
  EXPECT_EQ(t.target->describe(0.8301), "val_iou 0.8301 >= 0.82");
  const StopRules rules(t, std::nullopt);
  TrainingPosition pos;
  EpochStats st;
  st.validated = true;
  st.val_metrics = {{"iou", 0.81}};
  EXPECT_FALSE(rules.after_epoch(st, pos).stop);
  st.val_metrics = {{"iou", 0.83}};
  const StopDecision d = rules.after_epoch(st, pos);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.status, "success");
  // A target on IoU measures IoU even when train.metrics names only others.
  const Task both = make_task(deepcam_config({"train.metrics=[mse]", "train.target_iou=0.5"}));
  ASSERT_EQ(both.metrics.size(), 2u);
  EXPECT_EQ(both.metrics[0]->name, "iou");
}

TEST(Task, MetricsThatCannotScoreTheModelNameTheirKey) {
  const Config c = deepcam_config({"train.metrics=[iou, mae]"});
  const Task t = make_task(c);
  const TensorDesc scores{Shape{2, 3, 16, 32}, DType::f32, Device::cpu, Layout::channels_last};
  const TensorDesc labels{Shape{2, 16, 32}, DType::i32};
  try {
    check_metrics_fit(t, c, scores, labels);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train.metrics: metric mean_absolute_error"), std::string::npos) << what;
  }
  const Task iou_only = make_task(deepcam_config({"train.target_iou=0.5"}));
  EXPECT_NO_THROW(check_metrics_fit(iou_only, c, scores, labels));
  // IoU on CosmoFlow's regression output names the target's key.
  const Config cosmo = demo_config();
  Task wrong = make_task(cosmo);
  wrong.target = QualityTarget{&find_metric("iou", "test"), 0.5};
  wrong.metrics = {wrong.target->metric};
  Config with_target = cosmo;
  with_target.train.target_iou = 0.5;
  try {
    check_metrics_fit(wrong, with_target, {Shape{2, 4}, DType::f32}, {Shape{2, 4}, DType::f32});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.target_iou"), std::string::npos) << e.what();
  }
}

TEST(Task, ARegisteredModelMustTakeTheDataItIsGiven) {
  // The CosmoFlow model reads [4, 32, 32, 32]; the config's graph path checks shapes at load, a
  // registered model's inputs are checked when the task is made.
  Config c = demo_config();
  c.data.sample_shape = Shape{32, 32, 32, 3};
  try {
    make_task(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("input 'x'"), std::string::npos) << what;
    EXPECT_NE(what.find("data.sample_shape"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace crest
