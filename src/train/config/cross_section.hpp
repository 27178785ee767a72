// The rules that join sections: a task feeds the model the data's samples and targets, so
// model.input_shape is the data's sample (data.sample_shape, with DeepCAM's data.channels
// selected) and data.target_shape is [model.target_size] (DeepCAM: the labels [H, W]); a DeepCAM
// run reports IoU unless train.metrics says otherwise; and the reference's optimizer.lr is the
// schedule's rate when there is no lr_schedule section.
#pragma once
#include <map>
#include <string>

#include "config/model_section.hpp"
#include "config/reader.hpp"
#include "crest/train/config.hpp"

namespace crest::config {

// The model keys the data decides (input_shape), after checking that a given one agrees.
// data.sample_shape set by an override carries model.input_shape along unless that is overridden
// too: in the reference schema input_shape only restates it.
std::map<std::string, TaskValue> model_values_from_data(const SectionReader& data_reader,
                                                        const Section& model_section,
                                                        const DataConfig& data);

// data.target_shape from the model when not given, else checked against it; a graph model's x
// checked against the data's sample (and, for DeepCAM, its y against the int32 labels).
void bind_model_to_data(const SectionReader& data_reader, const Section& model_section,
                        const ModelConfig& model, DataConfig& data);

// [C, D, H, W] for [D, H, W, C]: a graph input's logical shape for a channels-last sample.
Shape channels_first(const Shape& channels_last);

// train.metrics left out of a DeepCAM run: [iou].
void default_task_metrics(const SectionReader& train_reader, Config& c);

// train.loss_scaling left out: the precision's default. The one place that decides it (off for
// every precision so far; dynamic is meant to become fp16's).
void default_loss_scaling(const SectionReader& train_reader, Config& c);

// lr_schedule.base_lr from optimizer.lr (or the Keras default) when lr_schedule is not given;
// refuses optimizer.lr beside an lr_schedule, which would overwrite it every epoch.
void resolve_learning_rate(const SectionReader& optimizer_reader, bool schedule_given, Config& c);

}  // namespace crest::config
