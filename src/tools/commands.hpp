// Sub-command registration: each command lives in its own file and adds itself to the app.
// Commands run inside CLI11 callbacks, so their crest::Error propagates out of app.parse().
#pragma once
#include <CLI/CLI.hpp>

namespace crest::tools {

// What `crest` exits with when the command itself succeeded: 0, or a code the command chose
// (crest train stopped early by a signal or its time budget: docs/checkpoints.md).
inline int command_exit_code = 0;

// What a compute-thread option's 0 means (crest/core/cpus.hpp: default_threads_per_rank).
inline constexpr const char* kDefaultThreadsHelp =
    "0 = OMP_NUM_THREADS where set, else this rank's share of the CPUs it may run on";

void register_train(CLI::App& app);              // crest train
void register_bench(CLI::App& app);              // crest bench train | peak | loader
void register_data_tools(CLI::App& app);         // crest datagen | stage | validate | inspect
void register_config(CLI::App& app);             // crest config from-args (config_command.cpp)
void register_search(CLI::App& app);             // crest search (search_command.cpp)
void register_predict(CLI::App& app);            // crest predict (predict_command.cpp)
void register_export(CLI::App& app);             // crest export (export_command.cpp)
void register_plan(CLI::App& app);               // crest plan (plan_command.cpp)
void register_bench_allreduce(CLI::App& bench);  // crest bench allreduce (bench_allreduce.cpp)
void register_bench_loader(CLI::App& bench);     // crest bench loader (bench_loader.cpp)
void register_bench_infer(CLI::App& bench);      // crest bench infer (bench_infer.cpp)
void register_bench_pipeline(CLI::App& bench);   // crest bench pipeline (bench_pipeline.cpp)

}  // namespace crest::tools
