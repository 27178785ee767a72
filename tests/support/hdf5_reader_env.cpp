// crest_tests reads HDF5 files through the reader process (crest/data/formats/hdf5_reader.hpp),
// which is an executable's `__hdf5-reader` subcommand: crest_tests has none, so its reader is the
// crest binary. Set before main (and before any test thread), unless the caller chose one.
#include <cstdlib>

namespace {
[[maybe_unused]] const int kReaderSet = ::setenv("CREST_HDF5_READER", CREST_BINARY, 0);
}  // namespace
