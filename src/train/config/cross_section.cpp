#include "config/cross_section.hpp"

#include <optional>
#include <vector>

namespace crest::config {

std::map<std::string, TaskValue> model_values_from_data(const SectionReader& data_reader,
                                                        const Section& model_section,
                                                        const DataConfig& data) {
  if (model_section.entries.count("layers")) return {};  // a graph declares its own inputs
  const SectionReader model(data_reader.source(), model_section);
  std::vector<int64_t> sample(static_cast<size_t>(data.sample_shape.rank()));
  for (size_t i = 0; i < sample.size(); ++i) sample[i] = data.sample_shape[static_cast<int>(i)];
  if (auto input = model.opt_int_list("input_shape", 1)) {
    const Source& src = data_reader.source();
    const bool follow = src.overridden("data.sample_shape") && !src.overridden("model.input_shape");
    if (!follow && *input != sample)
      model.fail("input_shape", list_text(*input) + " differs from data.sample_shape " +
                                    list_text(sample) +
                                    " (they must be equal; input_shape may be left out)");
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

void check_graph_input(const SectionReader& data_reader, const ModelConfig& m,
                       const DataConfig& data) {
  const Shape& s = data.sample_shape;
  const Shape want{s[3], s[0], s[1], s[2]};
  const GraphInput& in = m.graph->inputs().at(0);  // the samples' input
  if (in.per_sample != want)
    data_reader.fail("sample_shape", s.str() + " [D, H, W, C] does not match the model's input " +
                                         in.name + " " + in.per_sample.str() +
                                         " [C, D, H, W] (expected " + want.str() + ")");
}

}  // namespace

void bind_model_to_data(const SectionReader& data_reader, const ModelConfig& model,
                        DataConfig& data) {
  if (model.graph) check_graph_input(data_reader, model, data);
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
  c.lr_schedule.base_lr = lr.value_or(c.optimizer.name == OptimizerKind::sgd ? 0.01 : 0.001);
  c.lr_schedule.scaling = LrScaling::none;
}

}  // namespace crest::config
