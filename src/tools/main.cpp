// The `crest` command line: one binary for training, benchmarking and (later) data tools.
// Errors are crest::Error; usage and input errors exit 2, runtime errors exit 1.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5_reader.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/stop_signals.hpp"

namespace {
// A rank that fails must not leave the others waiting in a collective: in a multi-rank job the
// error ends the whole job (after the message, which names this rank's problem).
int fail(const char* what, int code) {
  std::fprintf(stderr, "crest: error: %s\n", what);
  std::fflush(stderr);
  crest::abort_parallel_job(code);
  return code;
}

// An error every rank raised at the same point (a user error rank 0 found and shared, such as an
// output_dir that holds an earlier run): rank 0 prints it, once for the job, and every rank exits
// with its code. No abort: no rank is left in a collective, and an abort from a quiet rank could
// end the job before rank 0 has said why.
int fail_everywhere(const crest::Error& e) {
  if (e.scope() == crest::Error::Scope::every_rank_printed_here) {
    std::fprintf(stderr, "crest: error: %s\n", e.what());
    std::fflush(stderr);
  }
  return e.exit_code();
}
}  // namespace

int main(int argc, char** argv) {
  // The HDF5 reader process (crest/data/formats/hdf5_reader.hpp): nothing else of crest runs in it.
  if (argc == 2 && std::string(argv[1]) == crest::kHdf5ReaderCommand)
    return crest::run_hdf5_reader(crest::kHdf5ReaderSocket);
  // Before any thread exists (MPI's, OpenMP's, the loaders'): they all inherit the blocked stop
  // signals, which only the router thread takes (train/stop_signals.hpp says why).
  crest::route_stop_signals();
  // A file-size limit (ulimit -f) reached mid-write is a write error naming the file (EFBIG),
  // handled as a full disk is, not a kill: a launcher (mpirun) may reset an inherited ignore.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"crest: deep learning on scientific data at supercomputer scale"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("crest ") + CREST_VERSION);
  crest::tools::register_train(app);
  crest::tools::register_bench(app);
  crest::tools::register_data_tools(app);
  crest::tools::register_config(app);
  crest::tools::register_search(app);
  crest::tools::register_predict(app);
  crest::tools::register_export(app);
  crest::tools::register_plan(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const crest::Error& e) {
    if (e.scope() != crest::Error::Scope::this_rank) return fail_everywhere(e);
    return fail(e.what(), e.exit_code());
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
  return crest::tools::command_exit_code;
}
