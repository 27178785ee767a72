// Trains two steps of a small CosmoFlow on built-in data through libcrest, and checks that the
// registries filled themselves when the library was loaded. Exits 0 and prints "consumer ok".
#include <algorithm>
#include <cmath>
#include <crest/core/error.hpp>
#include <crest/optim/optimizer_registry.hpp>
#include <crest/train/config.hpp>
#include <crest/train/dataset_registry.hpp>
#include <crest/train/trainer.hpp>
#include <iostream>
#include <sstream>
#include <string>

namespace {

const char* kConfig = R"(
data: {name: dummy, n_train: 4, n_valid: 0, sample_shape: [16, 16, 16, 4], batch_size: 2,
       n_epochs: 1, seed: 3}
model: {name: cosmoflow, conv_size: 2, n_conv_layers: 2, fc1_size: 8, fc2_size: 8, dropout: 0}
optimizer: {name: LAMB}
train: {checkpoint_every: 0}
crest: {threads: 1}
)";

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer OUTPUT_DIR\n";
    return 2;
  }
  if (!has(crest::optimizer_names(), "LAMB") || !has(crest::dataset_names(), "deepcam")) {
    std::cerr << "the registries are empty: libcrest's registrations did not run\n";
    return 1;
  }
  try {
    const crest::Config config =
        crest::load_config_text(kConfig, "consumer.yaml", {std::string("output_dir=") + argv[1]});
    std::ostringstream log;
    const crest::TrainSummary s = crest::run_training(config, crest::TrainOptions{}, log);
    if (s.steps != 2 || !std::isfinite(s.epochs.at(0).train_loss)) {
      std::cerr << "expected 2 steps with a finite loss:\n" << log.str();
      return 1;
    }
    std::cout << "consumer ok: " << s.steps << " steps, loss " << s.epochs.at(0).train_loss << "\n";
  } catch (const crest::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
