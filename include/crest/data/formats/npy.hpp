// NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Layout: magic "\x93NUMPY", major and minor version bytes, the header length (uint16 LE in 1.0,
// uint32 LE in 2.0/3.0), then a Python dict literal {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), } padded with spaces and ended by '\n', then the raw array data.
//
// Reading: dtypes f2 f4 f8, i1 i2 i4 i8, u1 u2 u4 u8 and b1 ('bool'), in either byte order. Data
// handed to the caller is always little-endian (big-endian files are byte-swapped) and in C
// order: fortran_order True arrays are transposed on read, so callers never see the difference.
// Structured dtypes and object arrays are rejected. Validation: magic, version, header length
// against the file size, the dict syntax and its exact key set, shape entries, and the data size:
// the file must hold exactly shape x itemsize bytes after the header (numpy itself ignores extra
// bytes; we reject them, as they mean the header and the data disagree). Every error is a
// crest::Error (input) starting with the file path.
//
// Writing produces the bytes numpy 1.24's np.save produces (version 1.0, or 2.0 when the header
// does not fit in 64 KiB; header padded so the data starts at a multiple of 64), atomically.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crest/core/byte_range.hpp"
#include "crest/core/dtype.hpp"

namespace crest {

// Element types of .npy files crest reads; wider than crest::DType (bool, int8, unsigned).
enum class NpyDType : uint8_t { f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, b1 };

size_t npy_dtype_size(NpyDType t);
const char* npy_dtype_name(NpyDType t);  // numpy's name: "float32", "int16", "bool", ...
std::string npy_descr(NpyDType t);       // little-endian descr as numpy writes it: "<f4", "|u1"
std::optional<DType> to_crest_dtype(NpyDType t);  // nullopt for i8, u16..u64, b1
// Throws crest::Error (input) for bf16, which numpy does not have.
NpyDType to_npy_dtype(DType t);

struct NpyHeader {
  std::string descr;  // as written in the file, e.g. ">i4"
  NpyDType dtype = NpyDType::f32;
  bool big_endian = false;     // the file stores multi-byte elements big-endian
  bool fortran_order = false;  // the file stores the array in Fortran order
  std::vector<int64_t> shape;  // empty = scalar
  int version_major = 1;
  int version_minor = 0;
  uint64_t data_offset = 0;  // where the data starts in the file
  uint64_t data_bytes = 0;   // numel x itemsize

  int64_t numel() const;
};

struct NpyArray {
  std::string descr;  // as written in the file
  NpyDType dtype = NpyDType::f32;
  std::vector<int64_t> shape;   // empty = scalar
  std::vector<std::byte> data;  // C order, little-endian

  int64_t numel() const;
};

// Reads and validates only the header (a few hundred bytes), e.g. to check a dataset up front.
NpyHeader read_npy_header(const std::string& path);
NpyArray read_npy(const std::string& path);
// Reads into dst (numel x dtype_size bytes) after checking that the file's dtype and shape are
// exactly `dtype` and `shape`; the error names file, found and expected.
void read_npy_into(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                   void* dst);

// Reads rows [begin[a], end[a]) of the array's first begin.size() axes (the others whole) into
// dst, in C order, after the checks read_npy_into makes: only the block's bytes, one read per
// contiguous run of rows (a spatial split's block of a sample). A Fortran-order file is read
// whole and the block copied out of it. Returns the bytes read from the file.
uint64_t read_npy_block_into(const std::string& path, DType dtype,
                             const std::vector<int64_t>& shape, const std::vector<int64_t>& begin,
                             const std::vector<int64_t>& end, void* dst);

// The bytes of the file that read_npy_block_into reads for that block of the array `h`
// describes: one range per contiguous run of rows, in file order (a Fortran-order array: all of
// its data). What staging keeps of a file under a spatial split.
std::vector<ByteRange> npy_block_ranges(const NpyHeader& h, const std::vector<int64_t>& begin,
                                        const std::vector<int64_t>& end);

// Writes a C-order, little-endian array atomically (temporary file, fsync, rename).
void write_npy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data);
void write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape,
               const void* data);

}  // namespace crest
