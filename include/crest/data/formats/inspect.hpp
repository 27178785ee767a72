// `crest inspect FILE`: what a data file holds, with the format recognised by content.
#pragma once
#include <string>

namespace crest {

enum class DataFileFormat { tfrecord, tfrecord_gzip, hdf5, npy, safetensors };

const char* data_file_format_name(DataFileFormat f);  // "TFRecord", "HDF5", ...

// Recognises the format from the first bytes: a TFRecord length header whose CRC matches, gzip
// magic 1f 8b (a gzip-compressed TFRecord), \x93NUMPY, the HDF5 signature \x89HDF\r\n\x1a\n
// (at offset 0 or a user-block offset 512, 1024, ...), or a safetensors header length followed
// by '{'. Throws crest::Error (input) naming the file when it is none of these.
DataFileFormat detect_data_file_format(const std::string& path);

// A human-readable, multi-line description. TFRecord: compression, record count (every CRC is
// verified on the way) and the first record's Example features; HDF5: every group and dataset
// with type, shape and storage; npy: dtype, shape, bytes; safetensors: tensors with dtype and
// shape, and the metadata. Errors are crest::Error (input) naming the file.
std::string inspect_file(const std::string& path);

}  // namespace crest
