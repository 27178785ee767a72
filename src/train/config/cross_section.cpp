#include "config/cross_section.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "crest/optim/optimizer_registry.hpp"
#include "crest/train/dataset_registry.hpp"

namespace crest::config {

std::map<std::string, TaskValue> model_values_from_data(const SectionReader& data_reader,
                                                        const Section& model_section,
                                                        const DataConfig& data) {
  if (model_section.entries.count("layers")) return {};  // a graph declares its own inputs
  const SectionReader model(data_reader.source(), model_section);
  // The sample as the model reads it: DeepCAM's channel selection applied.
  const std::vector<int64_t> sample = data.model_sample_shape().to_vector();
  const std::string& selection = find_dataset_type(data.name).selection_key;
  if (auto input = model.opt_int_list("input_shape", 1)) {
    const Source& src = data_reader.source();
    const bool follow = (src.overridden("data.sample_shape") || src.overridden("data.channels")) &&
                        !src.overridden("model.input_shape");
    if (!follow && *input != sample)
      model.fail("input_shape",
                 list_text(*input) + " differs from " +
                     (selection.empty() ? "data.sample_shape "
                                        : "the samples the data gives (data.sample_shape with "
                                          "data." +
                                              selection + " selected) ") +
                     list_text(sample) + " (they must be equal; input_shape may be left out)");
  }
  // A model's objection to its input shape is one to the data's sample shape.
  return {{"input_shape",
           {sample, [data_reader](const std::string& m) { data_reader.fail("sample_shape", m); }}}};
}

namespace {

int64_t target_size_of(const ModelConfig& m) {
  if (m.graph) return m.graph->inputs().at(1).per_sample[0];  // the targets' input
  if (const AttrValue* v = m.attrs.find("target_size")) return std::get<int64_t>(*v);
  return 0;
}

// The samples' input takes the data's sample channels first: [C, D, H, W] for [D, H, W, C].
void check_graph_input(const SectionReader& data_reader, const SectionReader& model_reader,
                       const ModelConfig& m, const DataConfig& data) {
  const Shape s = data.model_sample_shape();
  const Shape want = channels_first(s);
  const GraphInput& in = m.graph->inputs().at(0);  // the samples' input
  const DatasetType& type = find_dataset_type(data.name);
  const std::string& dims = type.sample_dims;
  if (in.per_sample != want)
    data_reader.fail(s != data.sample_shape ? type.selection_key : "sample_shape",
                     s.str() + " " + dims + " does not match the model's input " + in.name + " " +
                         in.per_sample.str() + " (expected " + want.str() + ")");
  // The loader hands the files' channels-last samples over as they are, never transposed.
  if (want[0] > 1 && in.layout != Layout::channels_last)
    model_reader.fail("inputs", "the data's samples are channels-last (" + dims +
                                    " in the files); declare the model's input " + in.name +
                                    " with layout: channels_last");
}

// A segmentation dataset's targets are the labels [H, W], a classification dataset's one label
// [] per sample: int32 class ids.
void bind_labels(const SectionReader& data_reader, const SectionReader& model_reader,
                 const ModelConfig& model, DataConfig& data) {
  const bool per_sample = find_dataset_type(data.name).one_label_per_sample;
  const Shape labels = per_sample ? Shape{} : Shape{data.sample_shape[0], data.sample_shape[1]};
  if (data_reader.has("target_shape") && data.target_shape != labels)
    data_reader.fail("target_shape", data.target_shape.str() + " is not the labels' " +
                                         (per_sample ? "[] (one per sample) " : "[H, W] ") +
                                         labels.str() + " (it may be left out)");
  data.target_shape = labels;
  if (!model.graph) return;
  const GraphInput& y = model.graph->inputs().at(1);
  if (y.per_sample != labels || !y.integer)
    model_reader.fail("inputs", "data.name: " + data.name + " gives int32 labels " + labels.str() +
                                    " per sample; the model's input " + y.name + " is " +
                                    (y.integer ? "int32 " : "float ") + y.per_sample.str() +
                                    " (declare it {name: " + y.name + ", shape: " + labels.str() +
                                    ", integer: true})");
}

}  // namespace

Shape channels_first(const Shape& channels_last) {
  std::vector<int64_t> d = channels_last.to_vector();
  std::rotate(d.rbegin(), d.rbegin() + 1, d.rend());
  return Shape(d);
}

void bind_model_to_data(const SectionReader& data_reader, const Section& model_section,
                        const ModelConfig& model, DataConfig& data) {
  const SectionReader model_reader(data_reader.source(), model_section);
  const bool labels = find_dataset_type(data.name).labels;
  if (model.graph && !labels) {
    const auto& in = model.graph->inputs();
    if (in[0].per_sample.rank() != 4 || in[1].integer || in[1].per_sample.rank() != 1)
      model_reader.fail("inputs",
                        "a graph model takes two inputs, in order: the samples [C, D, H, W] and "
                        "their targets [targets] (any names)");
  }
  if (model.graph) check_graph_input(data_reader, model_reader, model, data);
  if (labels) return bind_labels(data_reader, model_reader, model, data);
  const int64_t targets = target_size_of(model);
  if (!data_reader.has("target_shape")) {
    data.target_shape = Shape{targets};
    return;
  }
  if (data.target_shape != Shape{targets}) {
    const std::string n = std::to_string(targets);
    data_reader.fail("target_shape", data.target_shape.str() +
                                         " does not match model.target_size " + n + " (expected [" +
                                         n + "])");
  }
}

void default_task_metrics(const SectionReader& train_reader, Config& c) {
  const auto& metrics = find_dataset_type(c.data.name).default_metrics;
  if (!metrics.empty() && !train_reader.has("metrics")) c.train.metrics = metrics;
}

void default_loss_scaling(const SectionReader& train_reader, Config& c) {
  if (train_reader.has("loss_scaling")) return;
  switch (c.crest.precision) {
    case Precision::float32:
    case Precision::float64:
    case Precision::bf16:  // bf16 has float32's range: no scaling needed (torch.amp agrees)
      c.train.loss_scaling = LossScaling::off;
      return;
    case Precision::fp16:  // fp16's gradients underflow below 6e-8 without it
      c.train.loss_scaling = LossScaling::dynamic;
      return;
  }
}

void resolve_learning_rate(const SectionReader& opt, bool schedule_given, Config& c) {
  std::optional<double> lr;
  for (const char* k : {"lr", "learning_rate"})
    if (auto v = opt.opt_double(k)) lr = *v;
  if (schedule_given) {
    if (lr)
      opt.fail(opt.has("lr") ? "lr" : "learning_rate",
               std::string("lr_schedule sets the learning rate, so this would be ignored; set "
                           "lr_schedule.") +
                   (c.lr_schedule.per_step ? "start_lr" : "base_lr") + " instead");
    return;
  }
  c.lr_schedule.base_lr = lr.value_or(optimizer_default_lr(c.optimizer));
  c.lr_schedule.scaling = LrScaling::none;
}

}  // namespace crest::config
