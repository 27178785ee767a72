// HDF5 files that claim what they do not hold, written through the C API (crest's writer never
// produces them): what mutated files looked like to crest's readers in the fuzzing campaigns.
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "crest/data/formats/hdf5.hpp"

namespace crest::test {

// A DeepCAM sample whose climate/data has `data_dims` and climate/labels_0 the first two of them,
// neither ever written (no storage allocated: the file stays a few KB), plus climate/count, an
// integer scalar of `count_type_bytes` bytes per element.
inline void write_unbacked_hdf5(const std::string& path, const std::vector<hsize_t>& data_dims,
                                size_t count_type_bytes = 8) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t group = H5Gcreate2(file, "climate", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  auto dataset = [&](const char* name, hid_t type, const std::vector<hsize_t>& dims) {
    const hid_t space = dims.empty()
                            ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    H5Dclose(H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(space);
  };
  dataset("data", H5T_IEEE_F32LE, data_dims);
  dataset("labels_0", H5T_IEEE_F32LE, {data_dims[0], data_dims[1]});
  const hid_t wide = H5Tcopy(H5T_STD_I64LE);
  H5Tset_size(wide, count_type_bytes);
  dataset("count", wide, {});
  H5Tclose(wide);
  H5Gclose(group);
  H5Fclose(file);
}

}  // namespace crest::test
