// Regression tests of the fuzzing campaigns' findings (docs/security.md, "Fuzzing"): each input
// that made a harness fail, or one built to the same defect, now gets a crest::Error (input)
// naming the file and what is wrong. Inputs the harnesses found are committed under
// tests/fixtures/hostile/.
#include <hdf5.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "crest/data/formats/crc32c.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/safetensors.hpp"
#include "data_formats_test_util.hpp"

namespace crest {
namespace {

using test::expect_input_error;

std::string hostile(const std::string& name) {
  return std::string(CREST_SOURCE_DIR) + "/tests/fixtures/hostile/" + name;
}

// fuzz_checkpoint: checkpoint metadata (here a config string) that is not UTF-8 made
// write_safetensors throw nlohmann's exception, which nothing catches: std::terminate in the
// middle of a training run. A config value with a Latin-1 byte is enough.
TEST(FuzzFinding, SafetensorsWriterRefusesMetadataThatIsNotUtf8) {
  test::ScratchDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const float w[2] = {1, 2};
  const std::vector<SafetensorsEntry> tensors = {{"w", DType::f32, Shape({2}), w}};
  expect_input_error(
      [&] {
        write_safetensors(path, tensors, {{"config", "output_dir: r\xe9sum"}});
      },
      {path, "metadata value of \"config\"", "not valid UTF-8 (byte 13)"});
  expect_input_error(
      [&] {
        write_safetensors(path, {{"w\xff", DType::f32, Shape({2}), w}});
      },
      {path, "tensor name", "not valid UTF-8"});
  // Overlong forms and surrogates are not UTF-8 either; proper multi-byte text is.
  expect_input_error([&] { write_safetensors(path, tensors, {{"k", "\xc0\xaf"}}); }, {"UTF-8"});
  expect_input_error([&] { write_safetensors(path, tensors, {{"k", "\xed\xa0\x80"}}); }, {"UTF-8"});
  EXPECT_FALSE(std::filesystem::exists(path));
  write_safetensors(path, tensors,
                    {{"config", "output_dir: r\xc3\xa9sum\xe2\x82\xac\xf0\x9f\x98\x80"}});
  EXPECT_EQ(SafetensorsFile(path).metadata().at("config"),
            "output_dir: r\xc3\xa9sum\xe2\x82\xac\xf0\x9f\x98\x80");
}

// fuzz_hdf5: a chunk whose stored size is shorter than a chunk, with no filter to expand it,
// made libhdf5 1.10.8 copy past its buffer (heap-buffer-overflow in H5VM_memcpyvv, reading
// climate/data). crest now checks every chunk's size and place before libhdf5 reads any.
TEST(FuzzFinding, Hdf5UnfilteredChunkShorterThanAChunkIsRefusedBeforeReading) {
  const std::string path = hostile("hdf5_unfiltered_chunk_too_short.h5");
  expect_input_error([&] { (void)probe_deepcam_sample(path); },
                     {path, "climate/data: chunk", "bytes unfiltered, a chunk [2, 3, 2] has 48"});
}

// Datasets written by the HDF5 API with a dataspace but no data (storage never allocated), or an
// integer type of 1 KiB per element: what the fuzzer's mutated files looked like to crest.
void write_unbacked(const std::string& path, const std::vector<hsize_t>& data_dims,
                    size_t count_type_bytes) {
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

// fuzz_hdf5: a dataspace claiming far more than the file stores made the reader's callers
// allocate what it claims (the loader and `crest validate` size buffers from the probed shape).
TEST(FuzzFinding, Hdf5ShapeTheFileDoesNotStoreIsRefusedBeforeAnyAllocation) {
  test::ScratchDir dir;
  const std::string path = dir.file("claims.h5");
  write_unbacked(path, {65536, 65536, 16}, 8);
  ASSERT_LT(std::filesystem::file_size(path), 16384u);
  expect_input_error([&] { (void)probe_deepcam_sample(path); },
                     {path, "climate/data [65536, 65536, 16] claims 274877906944 bytes",
                      "stores 0 for it (truncated or unwritten)"});
}

// fuzz_hdf5: an element type of hundreds of MB (a corrupt datatype message) made libhdf5
// allocate that much for the conversion while reading climate/count of stats.h5.
TEST(FuzzFinding, Hdf5ElementOfImplausibleSizeIsRefused) {
  test::ScratchDir dir;
  const std::string path = dir.file("stats.h5");
  write_unbacked(path, {2, 2, 1}, 1024);
  expect_input_error([&] { (void)read_deepcam_stats(path); },
                     {path, "climate/count has elements of 1024 bytes"});
}

std::vector<std::byte> gzip(const std::vector<std::byte>& in) {
  std::vector<std::byte> out(compressBound(static_cast<uLong>(in.size())) + 64);
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A TFRecord length header claiming `length` bytes, with its CRC right.
std::vector<std::byte> length_header(uint64_t length) {
  std::vector<std::byte> h(12);
  for (int i = 0; i < 8; ++i) h[i] = static_cast<std::byte>(length >> (8 * i));
  const uint32_t crc = crc32c_mask(crc32c(h.data(), 8));
  for (int i = 0; i < 4; ++i) h[8 + i] = static_cast<std::byte>(crc >> (8 * i));
  return h;
}

// Review while writing the harnesses (fuzz_tfrecord_gzip's allocation limit): in a gzip file the
// record buffer grew by a fixed 64 MiB ahead of the data, so a 50-byte file claiming a 1 TiB
// record allocated 64 MiB. It now grows by at most what has arrived (at least 64 KiB).
TEST(FuzzFinding, GzipRecordBufferGrowsOnlyWithTheDataThatArrives) {
  std::vector<std::byte> plain = length_header(uint64_t{1} << 40);
  plain.resize(plain.size() + 100, std::byte{7});
  const std::vector<std::byte> file = gzip(plain);
  auto reader = TfRecordReader::from_memory(file, "huge.tfrecord.gz", TfRecordCompression::gzip);
  std::vector<std::byte> record;
  expect_input_error([&] { (void)reader.next(record); },
                     {"huge.tfrecord.gz", "record 0", "truncated inside the data (100 of"});
  EXPECT_LE(record.capacity(), size_t{64} << 10);
}

}  // namespace
}  // namespace crest
