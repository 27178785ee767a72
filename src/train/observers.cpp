#include "crest/train/observers.hpp"

#include <algorithm>

#include "crest/core/error.hpp"
#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

// What each benchmark's reference (mlcommons/hpc) logs that is not the same for all: DeepCAM's
// train.py ends every run with run_stop "success", the target reached or not. (CosmoFlow's
// train.py does too, but crest's CosmoFlow log keeps MLPerf's meaning, "success" only at the
// target; a benchmark not listed does the same.)
// A model whose MLPerf benchmark has its own name or rules; others log under the model's name.
struct BenchmarkLogRules {
  const char* model;
  const char* benchmark;  // submission_benchmark
  bool success_when_epochs_end;
};
constexpr BenchmarkLogRules kBenchmarkLogRules[] = {{"deepcam", "deepcam", true},
                                                    {"resnet50", "resnet", false}};

NameRegistry<ObserverType>& observer_registry() {
  static NameRegistry<ObserverType> observers("observer");  // built during static initialisation
  return observers;
}

}  // namespace

MlperfObserverOptions mlperf_options(const Config& config, const Task& task, bool resumed) {
  MlperfObserverOptions mo;
  mo.echo = config.mlperf.echo_stdout;
  mo.append = resumed;
  mo.benchmark = task.name;
  mo.quality_metric = task.quality_metric() ? task.quality_metric()->short_name : "";
  mo.target = task.target;
  for (const BenchmarkLogRules& rules : kBenchmarkLogRules)
    if (task.name == rules.model) {
      mo.benchmark = rules.benchmark;
      mo.success_when_epochs_end = rules.success_when_epochs_end;
    }
  return mo;
}

bool register_observer_type(ObserverType type) {
  const std::string name = type.name;
  return observer_registry().add(name, std::move(type));
}

std::vector<std::unique_ptr<RunObserver>> make_run_observers(const Config& config, const Task& task,
                                                             std::ostream& log, bool resumed,
                                                             bool progress_bar) {
  std::vector<const ObserverType*> types;
  for (const auto& name : observer_registry().names())
    types.push_back(&observer_registry().at(name));
  std::stable_sort(types.begin(), types.end(), [](const ObserverType* a, const ObserverType* b) {
    return a->order < b->order;
  });
  const ObserverContext context{config, task, log, resumed, progress_bar};
  std::vector<std::unique_ptr<RunObserver>> observers;
  for (const ObserverType* type : types)
    if (auto o = type->make(context)) observers.push_back(std::move(o));
  return observers;
}

}  // namespace crest
