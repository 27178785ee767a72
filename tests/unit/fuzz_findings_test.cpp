// Regression tests of the fuzzing campaigns' findings (docs/security.md, "Fuzzing"): each input
// that made a harness fail, or one built to the same defect, now gets a crest::Error (input)
// naming the file and what is wrong. Inputs the harnesses found are committed under
// tests/fixtures/hostile/.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/safetensors.hpp"
#include "crest/search/search_space.hpp"
#include "crest/train/config.hpp"
#include "data_formats_test_util.hpp"
#include "support/hostile_bytes.hpp"
#include "support/hostile_hdf5.hpp"

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

// The same finding's cause: a config with a Latin-1 byte loaded fine, trained, and failed at the
// first checkpoint (before the writer's check: std::terminate). The loader refuses it now,
// naming the line and column, and so an override.
TEST(FuzzFinding, ConfigThatIsNotUtf8IsRefusedWhenLoaded) {
  const std::string yaml = "data:\n  name: dummy\noutput_dir: r\xe9sum\n";
  expect_input_error([&] { (void)load_config_text(yaml, "latin1.yaml", {}); },
                     {"latin1.yaml:3:14: not valid UTF-8"});
  expect_input_error(
      [&] { (void)load_config_text("data:\n  name: dummy\n", "x.yaml", {"output_dir=\xff"}); },
      {"x.yaml: override 'output_dir=", "1:12: not valid UTF-8"});
  const std::string demo = std::string(CREST_SOURCE_DIR) + "/configs/cosmoflow-demo.yaml";
  EXPECT_EQ(load_config(demo, {"output_dir=r\xc3\xa9sum"}).output_dir, "r\xc3\xa9sum");
}

// fuzz_config: in a graph model, a layer key that is not a plain string (`out_channels: 32,!kernel:
// [3, 3, 3]`, a mutation of configs/cosmoflow-graph-demo.yaml) made yaml-cpp's bad-conversion
// exception escape the graph reader: std::terminate. Now an input error naming file and place.
TEST(FuzzFinding, GraphModelKeyThatIsNotAStringIsAnInputError) {
  const std::string path = hostile("config_graph_key_not_a_string.yaml");
  expect_input_error([&] { (void)load_config(path); },
                     {path, "model.layers: not a graph crest can read: bad conversion at line 26",
                      "must be a plain string"});
}

// fuzz_hdf5: a chunk whose stored size is shorter than a chunk, with no filter to expand it,
// made libhdf5 1.10.8 copy past its buffer (heap-buffer-overflow in H5VM_memcpyvv, reading
// climate/data). crest now checks every chunk's size and place before libhdf5 reads any.
TEST(FuzzFinding, Hdf5UnfilteredChunkShorterThanAChunkIsRefusedBeforeReading) {
  const std::string path = hostile("hdf5_unfiltered_chunk_too_short.h5");
  expect_input_error([&] { (void)probe_deepcam_sample(path); },
                     {path, "climate/data: chunk", "bytes unfiltered, a chunk [2, 3, 2] has 48"});
}

// fuzz_hdf5 (a timeout): a 796-byte file whose version-0 superblock points to a driver
// information block made libhdf5 zero 3 GB inside H5Fopen (2.5 s, 3.1 GB resident for `crest
// inspect`). Refused from the superblock before libhdf5 opens the file.
TEST(FuzzFinding, Hdf5SuperblockWithADriverInfoBlockIsRefusedBeforeLibhdf5Opens) {
  const std::string path = hostile("hdf5_driver_info_block.h5");
  expect_input_error([&] { (void)describe_hdf5(path); },
                     {path, "superblock points to a driver information block"});
  expect_input_error([&] { (void)probe_deepcam_sample(path); }, {path, "single-file HDF5 only"});
}

// fuzz_hdf5: a dataspace claiming far more than the file stores made the reader's callers
// allocate what it claims (the loader and `crest validate` size buffers from the probed shape).
TEST(FuzzFinding, Hdf5ShapeTheFileDoesNotStoreIsRefusedBeforeAnyAllocation) {
  test::ScratchDir dir;
  const std::string path = dir.file("claims.h5");
  test::write_unbacked_hdf5(path, {65536, 65536, 16}, 8);
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
  test::write_unbacked_hdf5(path, {2, 2, 1}, 1024);
  expect_input_error([&] { (void)read_deepcam_stats(path); },
                     {path, "climate/count has elements of 1024 bytes"});
}

// Review while writing the harnesses (fuzz_tfrecord_gzip's allocation limit): in a gzip file the
// record buffer grew by a fixed 64 MiB ahead of the data, so a 50-byte file claiming a 1 TiB
// record allocated 64 MiB. It now grows by at most what has arrived (at least 64 KiB).
TEST(FuzzFinding, GzipRecordBufferGrowsOnlyWithTheDataThatArrives) {
  std::vector<std::byte> plain = test::tfrecord_length_header(uint64_t{1} << 40);
  plain.resize(plain.size() + 100, std::byte{7});
  const std::vector<std::byte> file = test::gzip_bytes(plain);
  auto reader = TfRecordReader::from_memory(file, "huge.tfrecord.gz", TfRecordCompression::gzip);
  std::vector<std::byte> record;
  expect_input_error([&] { (void)reader.next(record); },
                     {"huge.tfrecord.gz", "record 0", "truncated inside the data (100 of"});
  EXPECT_LE(record.capacity(), size_t{64} << 10);
}

// fuzz_search_space: a mapping key that is not text (`? train.loss: {...}` at the top level makes
// a map the key)
// made yaml-cpp's bad-conversion exception escape parse_search_space; `crest search` ended with
// "bad conversion", exit 1. Now an input error naming the file and line, wherever a key is read.
TEST(FuzzFinding, SearchSpaceKeyThatIsNotTextIsAnInputError) {
  const std::string path = hostile("search_space_key_not_text.yaml");
  expect_input_error([&] { (void)load_search_space(path); },
                     {path + ":3: the top level: a key must be plain text, got 'train.loss:"});
  for (const std::string text :
       {"? [a]: 1\nparameters:\n  model.dropout: {uniform: [0, 1]}\n",
        "parameters:\n  model.dropout: {? [uniform]: [0, 1]}\n",
        "parameters:\n  a.b: {choice: [1]}\n  a.c: {choice: [2], when: {? [a.b]: 1}}\n"})
    expect_input_error([&] { (void)parse_search_space(text, "space.yaml"); },
                       {"space.yaml:", "a key must be plain text, got '["});
}

// fuzz_search_space: randint bounds beyond int64 (6.8e104) made the draw convert an
// out-of-range double to an integer (undefined behaviour; UBSan stopped the harness). Bounds
// must lie within +-2^53, where every integer is a double; ranges of infinite width are refused.
TEST(FuzzFinding, SearchSpaceRandintBoundBeyondInt64IsRefused) {
  const std::string path = hostile("search_space_randint_bound_beyond_int64.yaml");
  expect_input_error(
      [&] { (void)load_search_space(path); },
      {path + ":3: parameters.model.1}]}_siz_size", "bounds must lie within +-2^53"});
  const SearchSpace widest = parse_search_space(
      "parameters:\n  data.seed: {randint: [-9007199254740992, 9007199254740992]}\n", "s.yaml");
  for (uint64_t i = 0; i < 64; ++i) {
    const long long v = std::stoll(value_of(sample_trial(widest, 3, i), "data.seed"));
    EXPECT_LE(std::llabs(v), 9007199254740992LL);
  }
  expect_input_error(
      [&] {
        (void)parse_search_space("parameters:\n  model.dropout: {uniform: [-1e308, 1e308]}\n",
                                 "s.yaml");
      },
      {"s.yaml:2: parameters.model.dropout", "wider than a double holds"});
}

}  // namespace
}  // namespace crest
