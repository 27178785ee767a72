// Trains two steps of a small CosmoFlow on built-in data through libcrest (run_training), then
// three more in its own loop (a TrainingSession), and checks that the registries filled
// themselves when the library was loaded. Exits 0 and prints "consumer ok".
#include <algorithm>
#include <cmath>
#include <crest/core/error.hpp>
#include <crest/core/host_staging.hpp>
#include <crest/dist/communicator.hpp>
#include <crest/engine/training_session.hpp>
#include <crest/optim/optimizer_registry.hpp>
#include <crest/train/config.hpp>
#include <crest/train/dataset_registry.hpp>
#include <crest/train/trainer.hpp>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

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

// The loss of three steps of one fixed batch, each in the session's own step: the last must be
// finite and below the first (the optimizer moved the weights).
bool steps_in_own_loop(const crest::Config& config) {
  const crest::BuiltModel model = crest::build_model(config.model);
  crest::TrainingSessionOptions o;
  o.session.threads = 1;
  o.session.batch = config.data.batch_size;
  o.optimizer = config.optimizer;
  const auto comm = crest::make_single_process_communicator();
  const crest::TrainingSession session(model.graph, o, *comm);
  crest::Executor& ex = session.executor();
  for (const std::string& input : {model.sample_input, model.target_input}) {
    const crest::TensorView in = ex.input(input);
    crest::HostStaging staged(session.backend().memory(), in.data(), in.bytes(), false);
    for (int64_t i = 0; i < in.numel(); ++i) staged.as<float>()[i] = 0.01f * float(i % 97);
    staged.commit();
  }
  std::vector<double> losses;
  for (int i = 0; i < 3; ++i) losses.push_back(session.step().run(1e-2).loss);
  std::cout << "own loop: losses " << losses[0] << " " << losses[1] << " " << losses[2] << "\n";
  return std::isfinite(losses[2]) && losses[2] < losses[0];
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
    if (!steps_in_own_loop(config)) {
      std::cerr << "a TrainingSession's steps did not lower the loss\n";
      return 1;
    }
    std::cout << "consumer ok: " << s.steps << " steps, loss " << s.epochs.at(0).train_loss << "\n";
  } catch (const crest::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
