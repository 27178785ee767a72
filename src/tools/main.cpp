// The `crest` command line: one binary for training, benchmarking and (later) data tools.
// Errors are crest::Error; usage and input errors exit 2, runtime errors exit 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "crest/core/error.hpp"
#include "tools/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"crest: deep learning on scientific data at supercomputer scale"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("crest ") + CREST_VERSION);
  crest::tools::register_train(app);
  crest::tools::register_bench(app);
  crest::tools::register_data_tools(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const crest::Error& e) {
    std::fprintf(stderr, "crest: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crest: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
