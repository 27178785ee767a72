#include "formats/hdf5_support.hpp"

#include <vector>

#include "crest/core/error.hpp"

namespace crest::hdf5_support {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw_input(path + ": " + what);
}

std::string hdf5_reason() {
  std::vector<std::string> descs;
  auto collect = [](unsigned, const H5E_error2_t* err, void* data) -> herr_t {
    auto* out = static_cast<std::vector<std::string>*>(data);
    if (err && err->desc) out->emplace_back(err->desc);
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &descs);
  H5Eclear2(H5E_DEFAULT);
  if (descs.empty()) return "HDF5 gave no reason";
  if (descs.size() == 1 || descs.front() == descs.back()) return "HDF5: " + descs.back();
  return "HDF5: " + descs.front() + ": " + descs.back();
}

Handle file_access_properties(const std::string& path) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid())
    fail(path, "cannot create HDF5 file access properties (" + hdf5_reason() + ")");
#if H5_VERSION_GE(1, 10, 7)
  if (H5Pset_file_locking(fapl.get(), true, true) < 0) (void)hdf5_reason();
#endif
  return fapl;
}

}  // namespace crest::hdf5_support
