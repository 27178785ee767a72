// crest's HDF5 reader process (docs/security.md, "libhdf5 runs in a reader process").
//
// libhdf5 1.10.8 crashes and writes out of bounds on some damaged files that pass every check
// crest can make without parsing HDF5 itself. So libhdf5 never reads a user's file inside the
// crest process: probe_deepcam_sample, read_deepcam_sample, read_deepcam_stats and describe_hdf5
// (hdf5.hpp) send the request to a reader process, the crest executable started with
// posix_spawn as `crest __hdf5-reader` (not fork: crest has OpenMP, loader and MPI threads), over
// a socket pair. A sample comes back through shared memory (memfd) that crest sizes from the
// shape it expects. One reader per crest process, started at the first request and serving one
// request at a time (libhdf5 is serial; crest held one lock around every HDF5 call before), and
// started again after it dies. When it dies inside a request, the request throws crest::Error
// naming the file and the signal:
//   "<file>: libhdf5 crashed reading it (SIGSEGV): the file is damaged or hostile" (input)
// for a crash signal (SEGV, BUS, ILL, FPE, ABRT, SYS, TRAP). Any other end (killed from outside)
// is retried once by a fresh reader, then a runtime error "<file>: the HDF5 reader process ended
// (SIGKILL) while reading it, twice". Errors the reader raises keep their kind and exact text.
//
// Environment:
//   CREST_HDF5_IN_PROCESS=1   read in this process instead (debugging; what fuzz_hdf5 fuzzes)
//   CREST_HDF5_READER=PATH    the executable to start as the reader (default: this process's
//                             own, /proc/self/exe); crest_tests points it at the crest binary
//   CREST_TEST_HDF5_READER_KILL=TEXT  tests only: the reader raises SIGKILL on a request for a
//                             path containing TEXT
#pragma once
#include <string>

namespace crest {

// The hidden subcommand that runs the reader: `crest __hdf5-reader`, its socket on descriptor 3.
inline constexpr const char* kHdf5ReaderCommand = "__hdf5-reader";
inline constexpr int kHdf5ReaderSocket = 3;

// The reader's loop: serves requests on `socket` until the other end closes it. Returns the
// process's exit code. Called by main() before anything else is set up.
int run_hdf5_reader(int socket);

// Whether the readers of hdf5.hpp go through the reader process (the default) or run here
// (CREST_HDF5_IN_PROCESS=1).
bool hdf5_reads_isolated();

// The reader's process id, or -1 when none runs (tests).
int hdf5_reader_pid();

// Ends the reader (the next request starts a new one; for tests, which change its environment).
void stop_hdf5_reader();

}  // namespace crest
