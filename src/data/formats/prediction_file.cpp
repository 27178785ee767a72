#include "crest/data/formats/prediction_file.hpp"

#include <filesystem>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "formats/hdf5_support.hpp"

namespace crest {

using hdf5_support::fail;
using hdf5_support::file_access_properties;
using hdf5_support::Handle;
using hdf5_support::hdf5_reason;
using hdf5_support::Hdf5Session;

namespace {

// Rows of the small columns are chunked this many at a time (a chunk per row would make the file
// mostly chunk index); compressed columns get one chunk per row.
constexpr hsize_t kRowsPerChunk = 1024;

size_t type_bytes(const ColumnSpec& c) {
  switch (c.type) {
    case ColumnType::f32:
      return 4;
    case ColumnType::f16:
      return 2;
    case ColumnType::u8:
      return 1;
    case ColumnType::i64:
      return 8;
    case ColumnType::text:
      return c.text_bytes;
  }
  return 0;
}

// The HDF5 type, used for both the file and memory (no conversion: the caller's bytes are the
// stored bytes). float16 is IEEE binary16, which h5py reads as numpy float16.
Handle column_type(const std::string& path, const ColumnSpec& c) {
  hid_t t = -1;
  switch (c.type) {
    case ColumnType::f32:
      t = H5Tcopy(H5T_IEEE_F32LE);
      break;
    case ColumnType::f16:
      t = H5Tcopy(H5T_IEEE_F32LE);
      if (t >= 0 && (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
                     H5Tset_ebias(t, 15) < 0))
        fail(path, c.name + ": cannot make the float16 type (" + hdf5_reason() + ")");
      break;
    case ColumnType::u8:
      t = H5Tcopy(H5T_STD_U8LE);
      break;
    case ColumnType::i64:
      t = H5Tcopy(H5T_STD_I64LE);
      break;
    case ColumnType::text:
      t = H5Tcopy(H5T_C_S1);
      if (t >= 0 && (H5Tset_size(t, c.text_bytes) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0))
        fail(path, c.name + ": cannot make the text type (" + hdf5_reason() + ")");
      break;
  }
  if (t < 0) fail(path, c.name + ": cannot make its HDF5 type (" + hdf5_reason() + ")");
  return Handle(t, H5Tclose);
}

std::vector<hsize_t> dims_of(const ColumnSpec& c, hsize_t rows) {
  std::vector<hsize_t> d{rows};
  for (int64_t e : c.row_shape) d.push_back(static_cast<hsize_t>(e));
  return d;
}

Handle dataspace(const std::string& path, const std::vector<hsize_t>& dims,
                 const std::vector<hsize_t>* max = nullptr) {
  const hid_t s =
      H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max ? max->data() : nullptr);
  if (s < 0) fail(path, "cannot create a dataspace (" + hdf5_reason() + ")");
  return Handle(s, H5Sclose);
}

// An empty dataset that grows by rows.
Handle create_growing(const std::string& path, hid_t file, const ColumnSpec& c, hid_t type) {
  std::vector<hsize_t> max = dims_of(c, 0);
  max[0] = H5S_UNLIMITED;
  const Handle space = dataspace(path, dims_of(c, 0), &max);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  std::vector<hsize_t> chunk = dims_of(c, c.compress ? 1 : kRowsPerChunk);
  if (!dcpl.valid() || H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0 ||
      (c.compress && H5Pset_deflate(dcpl.get(), 4) < 0))
    fail(path, c.name + ": cannot set its storage (" + hdf5_reason() + ")");
  const hid_t d =
      H5Dcreate2(file, c.name.c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT);
  if (d < 0) fail(path, c.name + ": cannot create the dataset (" + hdf5_reason() + ")");
  return Handle(d, H5Dclose);
}

void write_attributes(const std::string& path, hid_t file, const PredictionAttributes& a) {
  const Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
  for (const auto& [name, value] : a.numbers) {
    const Handle attr(
        H5Acreate2(file, name.c_str(), H5T_IEEE_F64LE, scalar.get(), H5P_DEFAULT, H5P_DEFAULT),
        H5Aclose);
    if (!attr.valid() || H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value) < 0)
      fail(path, "attribute " + name + ": cannot write (" + hdf5_reason() + ")");
  }
  for (const auto& [name, value] : a.texts) {
    ColumnSpec c{name, ColumnType::text, {}, std::max<size_t>(value.size(), 1), false};
    const Handle type = column_type(path, c);
    const Handle attr(
        H5Acreate2(file, name.c_str(), type.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT),
        H5Aclose);
    std::string padded = value;
    padded.resize(c.text_bytes, '\0');
    if (!attr.valid() || H5Awrite(attr.get(), type.get(), padded.data()) < 0)
      fail(path, "attribute " + name + ": cannot write (" + hdf5_reason() + ")");
  }
}

Handle create_file(const AtomicOutputFile& out) {
  const Handle fapl = file_access_properties(out.path());
  const hid_t f = H5Fcreate(out.temp_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (f < 0) fail(out.path(), "cannot create (" + hdf5_reason() + ")");
  return Handle(f, H5Fclose);
}

}  // namespace

size_t ColumnSpec::row_bytes() const {
  size_t n = type_bytes(*this);
  for (int64_t e : row_shape) n *= static_cast<size_t>(e);
  return n;
}

struct PredictionFileWriter::State {
  explicit State(std::string path) : out(std::move(path)) {}
  AtomicOutputFile out;
  std::vector<ColumnSpec> columns;
  Handle file;
  std::vector<Handle> types, datasets;
  int64_t rows = 0;
};

PredictionFileWriter::PredictionFileWriter(std::string path, std::vector<ColumnSpec> columns)
    : state_(std::make_unique<State>(std::move(path))) {
  Hdf5Session session;
  State& s = *state_;
  s.out.close_descriptor();  // HDF5 writes the temporary file by name
  s.columns = std::move(columns);
  s.file = create_file(s.out);
  for (const ColumnSpec& c : s.columns) {
    s.types.push_back(column_type(s.out.path(), c));
    s.datasets.push_back(create_growing(s.out.path(), s.file.get(), c, s.types.back().get()));
  }
}

PredictionFileWriter::~PredictionFileWriter() {
  if (!state_) return;
  Hdf5Session session;
  state_->datasets.clear();
  state_->types.clear();
  state_->file.reset();
}

int64_t PredictionFileWriter::rows() const { return state_->rows; }

void PredictionFileWriter::append(const std::vector<const void*>& row) {
  Hdf5Session session;
  State& s = *state_;
  CREST_CHECK(row.size() == s.columns.size(), "a prediction row needs one value per column");
  const auto at = static_cast<hsize_t>(s.rows);
  for (size_t k = 0; k < s.columns.size(); ++k) {
    const ColumnSpec& c = s.columns[k];
    const hid_t d = s.datasets[k].get();
    const std::vector<hsize_t> grown = dims_of(c, at + 1);
    if (H5Dset_extent(d, grown.data()) < 0)
      fail(s.out.path(), c.name + ": cannot grow the dataset (" + hdf5_reason() + ")");
    const Handle file_space(H5Dget_space(d), H5Sclose);
    std::vector<hsize_t> start(grown.size(), 0), count = dims_of(c, 1);
    start[0] = at;
    const Handle mem_space = dataspace(s.out.path(), count);
    if (!file_space.valid() ||
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr) < 0 ||
        H5Dwrite(d, s.types[k].get(), mem_space.get(), file_space.get(), H5P_DEFAULT, row[k]) < 0)
      fail(s.out.path(),
           c.name + ": cannot write row " + std::to_string(at) + " (" + hdf5_reason() + ")");
  }
  ++s.rows;
}

void PredictionFileWriter::commit(const PredictionAttributes& attributes) {
  {
    Hdf5Session session;
    State& s = *state_;
    write_attributes(s.out.path(), s.file.get(), attributes);
    for (Handle& d : s.datasets)
      if (d.close() < 0) fail(s.out.path(), "closing a dataset failed (" + hdf5_reason() + ")");
    if (s.file.close() < 0)
      fail(s.out.path(), "closing the HDF5 file failed (" + hdf5_reason() + ")");
  }
  state_->out.commit();
}

void write_prediction_index(const std::string& path, const std::vector<std::string>& parts,
                            const std::vector<int64_t>& rows,
                            const std::vector<ColumnSpec>& columns,
                            const PredictionAttributes& attributes) {
  CREST_CHECK(parts.size() == rows.size(), "one row count per part");
  AtomicOutputFile out(path);
  out.close_descriptor();
  Hdf5Session session;
  Handle file = create_file(out);
  hsize_t total = 0;
  for (int64_t r : rows) total += static_cast<hsize_t>(r);
  for (const ColumnSpec& c : columns) {
    const Handle type = column_type(path, c);
    const Handle vspace = dataspace(path, dims_of(c, total));
    Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (!dcpl.valid()) fail(path, c.name + ": cannot create properties (" + hdf5_reason() + ")");
    hsize_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (rows[i] == 0) continue;
      const std::vector<hsize_t> count = dims_of(c, static_cast<hsize_t>(rows[i]));
      std::vector<hsize_t> start(count.size(), 0);
      start[0] = at;
      const Handle source_space = dataspace(path, count);
      if (H5Sselect_hyperslab(vspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                              nullptr) < 0 ||
          H5Pset_virtual(dcpl.get(), vspace.get(), parts[i].c_str(), c.name.c_str(),
                         source_space.get()) < 0)
        fail(path, c.name + ": cannot map part " + parts[i] + " (" + hdf5_reason() + ")");
      at += static_cast<hsize_t>(rows[i]);
    }
    H5Sselect_all(vspace.get());
    const Handle d(H5Dcreate2(file.get(), c.name.c_str(), type.get(), vspace.get(), H5P_DEFAULT,
                              dcpl.get(), H5P_DEFAULT),
                   H5Dclose);
    if (!d.valid())
      fail(path, c.name + ": cannot create the virtual dataset (" + hdf5_reason() + ")");
  }
  write_attributes(path, file.get(), attributes);
  if (file.close() < 0) fail(path, "closing the HDF5 file failed (" + hdf5_reason() + ")");
  out.commit();
}

}  // namespace crest
