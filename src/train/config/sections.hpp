// The table of each config section (one file each: mlperf.cpp, data.cpp, ...). The model section
// is not a table of its own: its keys are the registered model's (model_section.hpp).
#pragma once
#include "config/table.hpp"
#include "crest/train/config.hpp"

namespace crest::config {

const Table<MlperfConfig>& mlperf_table();
const Table<DataConfig>& data_table();
const Table<OptimizerConfig>& optimizer_table();
const Table<LrScheduleConfig>& lr_schedule_table();
const Table<TrainConfig>& train_table();
const Table<RuntimeConfig>& runtime_table();
const Table<DistConfig>& dist_table();
// dist.spatial: one part per spatial axis of the data's samples (all 1 when absent); a split is
// refused under 16-bit precision. After the data and crest sections.
void resolve_spatial(const SectionReader& dist_reader, Config& c);
// dist.pipeline: the combinations a pipeline does not run with yet are refused, naming the keys.
void resolve_pipeline(const SectionReader& dist_reader, const Config& c);

}  // namespace crest::config
