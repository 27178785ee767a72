#include "crest/data/formats/hdf5.hpp"

#include <hdf5.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5_in_process.hpp"
#include "formats/file_io.hpp"
#include "formats/hdf5_support.hpp"

namespace crest {

using hdf5_support::fail;
using hdf5_support::file_access_properties;
using hdf5_support::Handle;
using hdf5_support::hdf5_reason;
using hdf5_support::Hdf5Session;

namespace {

// A per-channel statistics file has a few dozen values; this only bounds what a corrupt
// dataspace can make us allocate.
constexpr hsize_t kMaxStatsChannels = hsize_t{1} << 20;

// A chunked dataset may be compressed; deflate, the filter HDF5 files use, expands at most
// 1032:1. A dataset claiming more than this many times its stored bytes cannot be real data, and
// refusing it bounds what its dataspace can make a reader allocate by the file's size.
constexpr uint64_t kMaxExpansion = 1100;

std::string dims_text(const std::vector<hsize_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

std::string type_text(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t bits = 8 * H5Tget_size(type);
  const bool big = H5Tget_order(type) == H5T_ORDER_BE;
  switch (cls) {
    case H5T_FLOAT:
      return "float" + std::to_string(bits) + (big ? " (big-endian)" : "");
    case H5T_INTEGER:
      return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits) +
             (big && bits > 8 ? " (big-endian)" : "");
    case H5T_STRING:
      return H5Tis_variable_str(type) > 0 ? "string (variable length)"
                                          : "string (" + std::to_string(bits / 8) + " bytes)";
    case H5T_COMPOUND:
      return "compound (" + std::to_string(bits / 8) + " bytes)";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array type";
    case H5T_VLEN:
      return "variable-length sequence";
    case H5T_OPAQUE:
      return "opaque (" + std::to_string(bits / 8) + " bytes)";
    case H5T_REFERENCE:
      return "reference";
    case H5T_BITFIELD:
      return "bitfield" + std::to_string(bits);
    case H5T_TIME:
      return "time";
    default:
      return "unknown type";
  }
}

// Refuses a version 0/1 superblock (at offset 0, 8-byte addresses) that points to a driver
// information block. Those blocks belong to family, multi and split files, never to a sample
// file; and libhdf5 1.10.8 trusts the size it reads there: fuzz_hdf5 found a 796-byte file that
// made it zero 3 GB in H5Fopen (tests/fixtures/hostile/hdf5_driver_info_block.h5).
void check_superblock(const std::string& path, const formats_io::InputFile& file) {
  unsigned char sb[64] = {};
  if (file.size() < sizeof sb) return;  // libhdf5 reports the truncation itself
  file.read_exact_at(0, sb, sizeof sb, "the HDF5 superblock");
  const bool v0_or_v1 = std::memcmp(sb, "\x89HDF\r\n\x1a\n", 8) == 0 && sb[8] <= 1;
  if (!v0_or_v1 || sb[13] != 8) return;
  const size_t at = sb[8] == 0 ? 48 : 52;  // version 1 has 4 more bytes before the addresses
  for (size_t i = 0; i < 8; ++i)
    if (sb[at + i] != 0xFF)
      fail(path,
           "the superblock points to a driver information block (a family, multi or split "
           "file, or a corrupt superblock): crest reads single-file HDF5 only");
}

Handle open_file(const std::string& path) {
  // Our own open first: a missing or unreadable file gets the system's reason, not HDF5's.
  check_superblock(path, formats_io::InputFile(path));
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 == 0) fail(path, "not an HDF5 file (no HDF5 signature)");
  if (is_hdf5 < 0) fail(path, "cannot read as HDF5 (" + hdf5_reason() + ")");
  const Handle fapl = file_access_properties(path);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (f < 0) fail(path, "cannot open as HDF5 (" + hdf5_reason() + ")");
  return Handle(f, H5Fclose);
}

struct Dataset {
  std::string name;
  Handle dset;
  Handle type;
  H5T_class_t cls = H5T_NO_CLASS;
  size_t size = 0;
  bool scalar = false;
  std::vector<hsize_t> dims;  // empty for a scalar
};

// Opens dataset `name` ("climate/data") and reads its type and shape. Each path component is
// checked so the error says what exactly is missing.
Dataset open_dataset(hid_t file, const std::string& path, const std::string& name) {
  size_t slash = 0;
  while ((slash = name.find('/', slash + 1)) != std::string::npos) {
    const std::string group = name.substr(0, slash);
    const htri_t exists = H5Lexists(file, group.c_str(), H5P_DEFAULT);
    if (exists <= 0) {
      if (exists < 0) (void)hdf5_reason();
      fail(path, "no group \"" + group + "\" (looking for dataset " + name + ")");
    }
  }
  const htri_t exists = H5Lexists(file, name.c_str(), H5P_DEFAULT);
  if (exists <= 0) {
    if (exists < 0) (void)hdf5_reason();
    fail(path, "no dataset \"" + name + "\"");
  }
  Dataset d;
  d.name = name;
  d.dset = Handle(H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!d.dset.valid()) fail(path, "cannot open \"" + name + "\" (" + hdf5_reason() + ")");
  if (H5Iget_type(d.dset.get()) != H5I_DATASET) fail(path, "\"" + name + "\" is not a dataset");
  d.type = Handle(H5Dget_type(d.dset.get()), H5Tclose);
  if (!d.type.valid()) fail(path, name + ": cannot read its datatype (" + hdf5_reason() + ")");
  d.cls = H5Tget_class(d.type.get());
  d.size = H5Tget_size(d.type.get());
  Handle space(H5Dget_space(d.dset.get()), H5Sclose);
  if (!space.valid()) fail(path, name + ": cannot read its dataspace (" + hdf5_reason() + ")");
  const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
  if (space_class == H5S_NULL) fail(path, name + ": has a null (empty) dataspace");
  d.scalar = space_class == H5S_SCALAR;
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail(path, name + ": cannot read its rank (" + hdf5_reason() + ")");
  d.dims.resize(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), d.dims.data(), nullptr) < 0)
    fail(path, name + ": cannot read its shape (" + hdf5_reason() + ")");
  return d;
}

std::string describe(const Dataset& d) {
  return type_text(d.type.get()) + " " + (d.scalar ? "scalar" : dims_text(d.dims));
}

// Refuses chunks libhdf5 1.10 would read out of bounds (found by fuzzing, docs/security.md): a
// chunk stored unfiltered (the dataset has no filters, or the chunk's filter mask skips them all)
// must hold exactly a chunk's bytes, and every chunk must lie inside the file.
void check_chunks(const std::string& path, const Dataset& d, hid_t dcpl) {
  std::vector<hsize_t> chunk_dims(d.dims.size());
  const int rank = H5Pget_chunk(dcpl, static_cast<int>(chunk_dims.size()), chunk_dims.data());
  if (rank != static_cast<int>(chunk_dims.size()))
    fail(path, d.name + ": cannot read its chunk shape (" + hdf5_reason() + ")");
  uint64_t chunk_bytes = d.size;
  for (const hsize_t n : chunk_dims) chunk_bytes *= n;  // bounded by HDF5's 4 GiB chunk limit
  const int filters = H5Pget_nfilters(dcpl);
  const unsigned all_skipped = filters > 0 && filters < 32 ? (1U << filters) - 1 : 0;
  Handle space(H5Dget_space(d.dset.get()), H5Sclose);
  hsize_t chunks = 0;
  if (!space.valid() || H5Dget_num_chunks(d.dset.get(), space.get(), &chunks) < 0)
    fail(path, d.name + ": cannot count its chunks (" + hdf5_reason() + ")");
  const uint64_t file_bytes = formats_io::InputFile(path).size();
  for (hsize_t i = 0; i < chunks; ++i) {
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t bytes = 0;
    if (H5Dget_chunk_info(d.dset.get(), space.get(), i, nullptr, &mask, &addr, &bytes) < 0)
      fail(path, d.name + ": cannot read chunk " + std::to_string(i) + " (" + hdf5_reason() + ")");
    const bool unfiltered = filters <= 0 || (mask & all_skipped) == all_skipped;
    if (unfiltered && bytes != chunk_bytes)
      fail(path, d.name + ": chunk " + std::to_string(i) + " stores " + std::to_string(bytes) +
                     " bytes unfiltered, a chunk " + dims_text(chunk_dims) + " has " +
                     std::to_string(chunk_bytes));
    if (addr == HADDR_UNDEF || addr > file_bytes || bytes > file_bytes - addr)
      fail(path, d.name + ": chunk " + std::to_string(i) + " lies beyond the end of the file");
  }
}

// Refuses a dataset whose element size is not a plain number's (1, 2, 4 or 8 bytes: a corrupt
// datatype message can claim hundreds of MB per element, which libhdf5 then allocates for the
// conversion) or whose shape claims more bytes than the file stores for it (contiguous storage
// must hold all of them; chunked storage at most kMaxExpansion times less). Checked before any
// read, so every buffer sized from the shape is bounded by the file's size.
void check_stored(const std::string& path, const Dataset& d) {
  if (d.size != 1 && d.size != 2 && d.size != 4 && d.size != 8)
    fail(path, d.name + " has elements of " + std::to_string(d.size) +
                   " bytes, not a 1-, 2-, 4- or 8-byte number");
  uint64_t logical = d.size;
  for (const hsize_t n : d.dims) {
    if (n != 0 && logical > std::numeric_limits<uint64_t>::max() / n)
      fail(path, d.name + " has an impossibly large shape " + dims_text(d.dims));
    logical *= n;
  }
  const uint64_t stored = H5Dget_storage_size(d.dset.get());
  Handle dcpl(H5Dget_create_plist(d.dset.get()), H5Pclose);
  const bool chunked = dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED;
  if (!dcpl.valid()) (void)hdf5_reason();
  if (chunked) check_chunks(path, d, dcpl.get());
  const bool missing = chunked ? logical / kMaxExpansion > stored : stored < logical;
  if (missing)
    fail(path, d.name + " " + dims_text(d.dims) + " claims " + std::to_string(logical) +
                   " bytes but the file stores " + std::to_string(stored) + " for it (" +
                   (chunked ? "more than any compression expands to" : "truncated or unwritten") +
                   ")");
}

struct SampleFile {
  Handle file;
  Dataset data;
  Dataset labels;
  DeepcamSampleShape shape;
};

SampleFile open_sample(const std::string& path) {
  SampleFile s;
  s.file = open_file(path);
  s.data = open_dataset(s.file.get(), path, "climate/data");
  s.labels = open_dataset(s.file.get(), path, "climate/labels_0");
  if (s.data.cls != H5T_FLOAT || s.data.size != 4 || s.data.dims.size() != 3)
    fail(path, "climate/data is " + describe(s.data) + ", expected float32 of rank 3 (H, W, C)");
  if ((s.labels.cls != H5T_FLOAT && s.labels.cls != H5T_INTEGER) || s.labels.dims.size() != 2)
    fail(path, "climate/labels_0 is " + describe(s.labels) +
                   ", expected a float or integer array of rank 2 (H, W)");
  if (s.labels.dims[0] != s.data.dims[0] || s.labels.dims[1] != s.data.dims[1])
    fail(path, "climate/labels_0 is " + dims_text(s.labels.dims) + " but climate/data is " +
                   dims_text(s.data.dims) + ": height and width must match");
  for (hsize_t d : s.data.dims)
    if (d == 0 || d > static_cast<hsize_t>(std::numeric_limits<int32_t>::max()))
      fail(path, "climate/data has an unusable shape " + dims_text(s.data.dims));
  check_stored(path, s.data);
  check_stored(path, s.labels);
  s.shape = {static_cast<int64_t>(s.data.dims[0]), static_cast<int64_t>(s.data.dims[1]),
             static_cast<int64_t>(s.data.dims[2])};
  return s;
}

// Integer labels outside int32 make the conversion fail instead of being clipped silently.
H5T_conv_ret_t abort_on_range_error(H5T_conv_except_t except, hid_t, hid_t, void*, void*, void*) {
  return except == H5T_CONV_EXCEPT_RANGE_HI || except == H5T_CONV_EXCEPT_RANGE_LOW
             ? H5T_CONV_ABORT
             : H5T_CONV_UNHANDLED;
}

void read_labels(const std::string& path, const SampleFile& s, int32_t* labels) {
  const auto n = static_cast<size_t>(s.shape.height * s.shape.width);
  if (s.labels.cls == H5T_FLOAT) {
    // Read the floats into the caller's int32 buffer (same size), then convert in place.
    if (H5Dread(s.labels.dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) < 0)
      fail(path, "cannot read climate/labels_0 (" + hdf5_reason() + ")");
    for (size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, labels + i, sizeof v);
      if (!(std::isfinite(v) && v == std::trunc(v) && v >= -2147483648.0f && v < 2147483648.0f))
        fail(path, "climate/labels_0[" + std::to_string(i / static_cast<size_t>(s.shape.width)) +
                       ", " + std::to_string(i % static_cast<size_t>(s.shape.width)) +
                       "] = " + std::to_string(v) + " is not an integer class id");
      labels[i] = static_cast<int32_t>(v);
    }
    return;
  }
  Handle xfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  if (!xfer.valid() || H5Pset_type_conv_cb(xfer.get(), abort_on_range_error, nullptr) < 0)
    fail(path, "cannot set up the label conversion (" + hdf5_reason() + ")");
  if (H5Dread(s.labels.dset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, xfer.get(), labels) < 0)
    fail(path, "cannot read climate/labels_0 as int32 (" + hdf5_reason() +
                   "; a label outside the int32 range?)");
}

// ---- writing ----

Handle create_file(const AtomicOutputFile& out) {
  const Handle fapl = file_access_properties(out.path());
  const hid_t f = H5Fcreate(out.temp_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (f < 0) fail(out.path(), "cannot create (" + hdf5_reason() + ")");
  return Handle(f, H5Fclose);
}

Handle create_group(const std::string& path, hid_t parent, const char* name) {
  const hid_t g = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) fail(path, std::string("cannot create group ") + name + " (" + hdf5_reason() + ")");
  return Handle(g, H5Gclose);
}

// Creates dataset `name` of `file_type` with `dims` (empty: scalar) and writes `data` to it.
void write_dataset(const std::string& path, hid_t group, const char* name, hid_t file_type,
                   hid_t mem_type, const std::vector<hsize_t>& dims, const void* data) {
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  if (!space.valid())
    fail(path, std::string(name) + ": cannot create dataspace (" + hdf5_reason() + ")");
  Handle dset(
      H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  if (!dset.valid())
    fail(path, std::string(name) + ": cannot create dataset (" + hdf5_reason() + ")");
  if (H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail(path, std::string(name) + ": write failed (" + hdf5_reason() + ")");
  if (dset.close() < 0) fail(path, std::string(name) + ": close failed (" + hdf5_reason() + ")");
}

void finish_file(AtomicOutputFile& out, Handle& group, Handle& file) {
  if (group.close() < 0 || file.close() < 0)
    fail(out.path(), "closing the HDF5 file failed (" + hdf5_reason() + ")");
  out.commit();
}

std::vector<float> read_stats_array(const std::string& path, hid_t file, const std::string& name) {
  const Dataset d = open_dataset(file, path, name);
  if (d.cls != H5T_FLOAT || d.dims.size() != 1 || d.dims[0] == 0 || d.dims[0] > kMaxStatsChannels)
    fail(path, name + " is " + describe(d) + ", expected a non-empty 1-D float array");
  check_stored(path, d);
  std::vector<float> out(static_cast<size_t>(d.dims[0]));
  if (H5Dread(d.dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    fail(path, "cannot read " + name + " (" + hdf5_reason() + ")");
  return out;
}

// ---- listing ----

struct LinkEntry {
  std::string name;
  H5L_type_t type;
};

#if H5_VERSION_GE(1, 12, 0)
herr_t collect_link(hid_t, const char* name, const H5L_info2_t* info, void* data) {
#else
herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
#endif
  auto* out = static_cast<std::vector<LinkEntry>*>(data);
  out->push_back({name, info->type});
  return 0;
}

std::string storage_text(hid_t dset) {
  Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
  if (!dcpl.valid()) return "";
  std::string out;
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CONTIGUOUS:
      out = "contiguous";
      break;
    case H5D_COMPACT:
      out = "compact";
      break;
    case H5D_VIRTUAL:
      out = "virtual";
      break;
    case H5D_CHUNKED: {
      hsize_t chunk[H5S_MAX_RANK];
      const int rank = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk);
      out = "chunked " + dims_text(std::vector<hsize_t>(chunk, chunk + std::max(rank, 0)));
      break;
    }
    default:
      out = "unknown layout";
  }
  const int filters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    char name[64] = {};
    if (H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, sizeof name,
                       name, &config) >= 0)
      out += std::string(", ") + (name[0] ? name : "filter");
  }
  return out;
}

}  // namespace

std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

std::string DeepcamSampleShape::str() const {
  return std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(channels) +
         " (HxWxC)";
}

std::string DeepcamWindow::str() const {
  return "rows [" + std::to_string(h0) + ", " + std::to_string(h1) + ") x columns [" +
         std::to_string(w0) + ", " + std::to_string(w1) + ")";
}

namespace hdf5_in_process {

DeepcamSampleShape probe_deepcam_sample(const std::string& path) {
  Hdf5Session session;
  return open_sample(path).shape;
}

int64_t deepcam_data_offset(const std::string& path) {
  Hdf5Session session;
  const SampleFile s = open_sample(path);
  const hid_t data = s.data.dset.get();
  Handle dcpl(H5Dget_create_plist(data), H5Pclose);
  if (!dcpl.valid()) fail(path, "cannot read climate/data's layout (" + hdf5_reason() + ")");
  const auto bytes = static_cast<uint64_t>(s.shape.height * s.shape.width * s.shape.channels) * 4;
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl.get()) != 0 ||
      H5Dget_storage_size(data) != bytes)
    return -1;
  const haddr_t offset = H5Dget_offset(data);
  return offset == HADDR_UNDEF ? -1 : static_cast<int64_t>(offset);
}

void read_deepcam_sample(const std::string& path, const DeepcamSampleShape& expected,
                         float* data_hwc, int32_t* labels_hw) {
  Hdf5Session session;
  const SampleFile s = open_sample(path);
  if (s.shape != expected)
    fail(path, "sample is " + s.shape.str() + ", expected " + expected.str());
  if (data_hwc &&
      H5Dread(s.data.dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data_hwc) < 0)
    fail(path, "cannot read climate/data (" + hdf5_reason() + ")");
  if (labels_hw) read_labels(path, s, labels_hw);
}

void read_deepcam_data_block(const std::string& path, const DeepcamSampleShape& expected,
                             const DeepcamWindow& window, float* data_block_hwc) {
  Hdf5Session session;
  const SampleFile s = open_sample(path);
  if (s.shape != expected)
    fail(path, "sample is " + s.shape.str() + ", expected " + expected.str());
  if (window.h0 < 0 || window.h1 <= window.h0 || window.h1 > s.shape.height || window.w0 < 0 ||
      window.w1 <= window.w0 || window.w1 > s.shape.width)
    fail(path, window.str() + " is not a block of a sample of " + s.shape.str());
  const std::array<hsize_t, 3> start{static_cast<hsize_t>(window.h0),
                                     static_cast<hsize_t>(window.w0), 0};
  const std::array<hsize_t, 3> count{static_cast<hsize_t>(window.h1 - window.h0),
                                     static_cast<hsize_t>(window.w1 - window.w0),
                                     static_cast<hsize_t>(s.shape.channels)};
  Handle file_space(H5Dget_space(s.data.dset.get()), H5Sclose);
  Handle memory_space(H5Screate_simple(3, count.data(), nullptr), H5Sclose);
  if (!file_space.valid() || !memory_space.valid() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                          nullptr) < 0)
    fail(path, "cannot select " + window.str() + " of climate/data (" + hdf5_reason() + ")");
  if (H5Dread(s.data.dset.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(),
              H5P_DEFAULT, data_block_hwc) < 0)
    fail(path, "cannot read " + window.str() + " of climate/data (" + hdf5_reason() + ")");
}

}  // namespace hdf5_in_process

void write_deepcam_sample(const std::string& path, const DeepcamSampleShape& shape,
                          const float* data_hwc, const float* labels_hw) {
  if (shape.height <= 0 || shape.width <= 0 || shape.channels <= 0)
    fail(path, "cannot write a sample of shape " + shape.str());
  if (!data_hwc || !labels_hw) fail(path, "cannot write a sample without data and labels");
  Hdf5Session session;
  AtomicOutputFile out(path);
  out.close_descriptor();  // HDF5 writes the temporary file by name
  Handle file = create_file(out);
  Handle climate = create_group(path, file.get(), "climate");
  const auto h = static_cast<hsize_t>(shape.height), w = static_cast<hsize_t>(shape.width),
             c = static_cast<hsize_t>(shape.channels);
  write_dataset(path, climate.get(), "data", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {h, w, c}, data_hwc);
  write_dataset(path, climate.get(), "labels_0", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {h, w},
                labels_hw);
  finish_file(out, climate, file);
}

namespace hdf5_in_process {

DeepcamStats read_deepcam_stats(const std::string& path) {
  Hdf5Session session;
  Handle file = open_file(path);
  const Dataset count = open_dataset(file.get(), path, "climate/count");
  const bool single = count.scalar || (count.dims.size() == 1 && count.dims[0] == 1);
  if (count.cls != H5T_INTEGER || !single)
    fail(path, "climate/count is " + describe(count) + ", expected an integer scalar");
  check_stored(path, count);
  DeepcamStats stats;
  if (H5Dread(count.dset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &stats.count) < 0)
    fail(path, "cannot read climate/count (" + hdf5_reason() + ")");
  stats.minval = read_stats_array(path, file.get(), "climate/minval");
  stats.maxval = read_stats_array(path, file.get(), "climate/maxval");
  stats.mean = read_stats_array(path, file.get(), "climate/mean");
  stats.sqmean = read_stats_array(path, file.get(), "climate/sqmean");
  const size_t n = stats.minval.size();
  if (stats.maxval.size() != n || stats.mean.size() != n || stats.sqmean.size() != n)
    fail(path, "climate/minval, maxval, mean and sqmean have different lengths (" +
                   std::to_string(n) + ", " + std::to_string(stats.maxval.size()) + ", " +
                   std::to_string(stats.mean.size()) + ", " + std::to_string(stats.sqmean.size()) +
                   ")");
  return stats;
}

}  // namespace hdf5_in_process

void write_deepcam_stats(const std::string& path, const DeepcamStats& stats) {
  const size_t n = stats.minval.size();
  if (n == 0 || stats.maxval.size() != n || stats.mean.size() != n || stats.sqmean.size() != n)
    fail(path,
         "cannot write statistics: minval, maxval, mean and sqmean must have the same, "
         "non-zero length");
  Hdf5Session session;
  AtomicOutputFile out(path);
  out.close_descriptor();
  Handle file = create_file(out);
  Handle climate = create_group(path, file.get(), "climate");
  write_dataset(path, climate.get(), "count", H5T_STD_I64LE, H5T_NATIVE_INT64, {}, &stats.count);
  const std::vector<hsize_t> dims{static_cast<hsize_t>(n)};
  write_dataset(path, climate.get(), "minval", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims,
                stats.minval.data());
  write_dataset(path, climate.get(), "maxval", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims,
                stats.maxval.data());
  write_dataset(path, climate.get(), "mean", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims,
                stats.mean.data());
  write_dataset(path, climate.get(), "sqmean", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims,
                stats.sqmean.data());
  finish_file(out, climate, file);
}

namespace hdf5_in_process {

std::string describe_hdf5(const std::string& path) {
  Hdf5Session session;
  Handle file = open_file(path);
  std::vector<LinkEntry> links;
#if H5_VERSION_GE(1, 12, 0)
  const herr_t rc = H5Lvisit2(file.get(), H5_INDEX_NAME, H5_ITER_INC, collect_link, &links);
#else
  const herr_t rc = H5Lvisit(file.get(), H5_INDEX_NAME, H5_ITER_INC, collect_link, &links);
#endif
  if (rc < 0) fail(path, "cannot list the file's contents (" + hdf5_reason() + ")");
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& link : links) {
    const std::string name = "/" + link.name;
    if (link.type == H5L_TYPE_SOFT || link.type == H5L_TYPE_EXTERNAL) {
      rows.emplace_back(name, link.type == H5L_TYPE_SOFT ? "soft link" : "external link");
      continue;
    }
    Handle obj(H5Oopen(file.get(), link.name.c_str(), H5P_DEFAULT), H5Oclose);
    if (!obj.valid()) {
      rows.emplace_back(name, "unreadable object (" + hdf5_reason() + ")");
      continue;
    }
    switch (H5Iget_type(obj.get())) {
      case H5I_GROUP:
        rows.emplace_back(name + "/", "group");
        break;
      case H5I_DATATYPE:
        rows.emplace_back(name, "named datatype");
        break;
      case H5I_DATASET: {
        try {
          const Dataset d = open_dataset(file.get(), path, link.name);
          const std::string storage = storage_text(d.dset.get());
          rows.emplace_back(name, describe(d) + (storage.empty() ? "" : "  (" + storage + ")"));
        } catch (const Error& e) {
          // One odd dataset (null dataspace, unreadable type) should not hide the rest.
          std::string why = e.what();
          if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
          rows.emplace_back(name, "dataset: " + why);
        }
        break;
      }
      default:
        rows.emplace_back(name, "object of unknown kind");
    }
  }
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::string out;
  for (const auto& [name, what] : rows)
    out += name + std::string(width + 2 - name.size(), ' ') + what + "\n";
  if (rows.empty()) out = "(no groups or datasets)\n";
  return out;
}

}  // namespace hdf5_in_process

}  // namespace crest
