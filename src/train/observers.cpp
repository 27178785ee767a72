#include "crest/train/observers.hpp"

namespace crest {

std::vector<std::unique_ptr<RunObserver>> make_run_observers(const Config& config, std::ostream& log) {
  std::vector<std::unique_ptr<RunObserver>> observers;
  if (!config.output_dir.empty()) observers.push_back(make_tensorboard_observer(config.output_dir + "/tensorboard", log));
  return observers;
}

}  // namespace crest
