// `crest inspect` and `crest validate` on hostile files (issue 16: never crash, never hang, never
// allocate more than a bound derived from the file size). For each format: a truncated file, a
// length or shape field claiming up to 2^63 bytes, and a wrong magic. In process, inspect_file
// must throw crest::Error (input) naming the file while its largest allocation stays under the
// bound; through the binary, both commands must exit 2 within a time limit, naming the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/inspect.hpp"
#include "support/alloc_counter.hpp"
#include "support/cli_util.hpp"
#include "support/hostile_bytes.hpp"
#include "support/hostile_hdf5.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;
using test::bytes_of;

struct Hostile {
  std::string name;  // file name, its extension what `crest validate` looks for
  Bytes bytes;
  std::string says;  // a piece of the expected message
};

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes le(uint64_t v, int n) {
  Bytes out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>(v >> (8 * i));
  return out;
}

Bytes head(Bytes b, size_t n) {
  b.resize(n);
  return b;
}

Bytes framed(const Bytes& record) {
  return test::tfrecord_length_header(record.size()) + record + le(0, 4);
}

std::vector<Hostile> tfrecord_files() {
  const Bytes two63 = test::tfrecord_length_header(uint64_t{1} << 63);
  return {
      {"huge_length.tfrecord", two63 + le(0, 4), "length field says 9223372036854775808 bytes"},
      {"truncated.tfrecord", head(framed(Bytes(100, std::byte{1})), 60), "truncated"},
      {"huge_length_gzip.tfrecord", test::gzip_bytes(two63 + Bytes(100, std::byte{2})),
       "record length 9223372036854775808 is impossibly large"},
      {"truncated_gzip.tfrecord", head(test::gzip_bytes(framed(Bytes(3000, std::byte{3}))), 40),
       "gzip"},
  };
}

Bytes npy(const std::string& dict, const Bytes& data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  return bytes_of("\x93NUMPY\x01") + Bytes{std::byte{0}} + le(header.size(), 2) + bytes_of(header) +
         data;
}

std::vector<Hostile> npy_files() {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  return {
      {"huge_header.data.npy",
       bytes_of("\x93NUMPY\x02") + Bytes{std::byte{0}} + le(0xFFFFFFF0u, 4) + bytes_of("{'descr'"),
       "header"},
      {"huge_shape.data.npy", npy(f4 + "(4611686018427387904, 4), }", Bytes(16)), "shape"},
      {"truncated.data.npy", npy(f4 + "(2, 3), }", Bytes(20)), "20"},
      {"wrong_magic.data.npy", bytes_of("\x93NUMPZ\x01") + Bytes(120), ""},
  };
}

Bytes safetensors(const std::string& json, const Bytes& data) {
  return le(json.size(), 8) + bytes_of(json) + data;
}

std::vector<Hostile> safetensors_files() {
  return {
      {"huge_header.safetensors", le(uint64_t{1} << 63, 8) + bytes_of("{}"), "unknown format"},
      {"huge_offsets.safetensors",
       safetensors(R"({"a":{"dtype":"F32","shape":[2305843009213693952],)"
                   R"("data_offsets":[0,9223372036854775808]}})",
                   Bytes(8)),
       "\"a\""},
      {"truncated.safetensors",
       safetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", Bytes(8)), "a"},
  };
}

// Every hostile file's largest allocation while inspect_file refuses it, against a bound from
// its size: gzip inflates at most 1032:1, and the readers' fixed buffers are under 1 MiB.
void expect_refused_within_bound(const std::string& path, const std::string& says) {
  const uint64_t size = fs::file_size(path);
  test::AllocationStats stats;
  try {
    test::AllocationCounter counter;
    try {
      (void)inspect_file(path);
    } catch (...) {
      stats = counter.stats();
      throw;
    }
    stats = counter.stats();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos)
        << e.what() << "\n  lacks " << says;
  }
  EXPECT_LE(stats.largest, (uint64_t{1} << 20) + 2100 * size) << path;
}

// `crest inspect` on every file, then `crest validate` on the directory: exit 2, each file named.
void expect_cli_refuses(const std::string& dir, const std::vector<std::string>& paths,
                        bool inspect_errors = true) {
  for (const auto& p : paths) {
    const auto r =
        test::run_shell("timeout 20 " + std::string(CREST_BINARY) + " inspect " + p + " 2>&1");
    if (inspect_errors) {
      EXPECT_EQ(r.code, 2) << r.out;
      EXPECT_NE(r.out.find("crest: error: " + p), std::string::npos) << r.out;
    } else {
      EXPECT_TRUE(r.code == 0 || r.code == 2) << r.out;  // a listing, or a clean refusal
    }
  }
  const auto r = test::run_shell("timeout 60 " + std::string(CREST_BINARY) + " validate " + dir +
                                 " --threads 2 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  for (const auto& p : paths)
    EXPECT_NE(r.out.find(fs::path(p).filename().string()), std::string::npos)
        << r.out << "\n  does not name " << p;
}

std::vector<std::string> write_all(const test::TempDir& t, const std::vector<Hostile>& files) {
  std::vector<std::string> paths;
  for (const auto& f : files) {
    paths.push_back(t.file(f.name));
    test::write_file_bytes(paths.back(), f.bytes);
  }
  return paths;
}

// Writes `files` into t and expects each refused in-process within the allocation bound;
// returns their paths for the command-line checks.
std::vector<std::string> expect_all_refused(const test::TempDir& t,
                                            const std::vector<Hostile>& files) {
  auto paths = write_all(t, files);
  for (size_t i = 0; i < files.size(); ++i) expect_refused_within_bound(paths[i], files[i].says);
  return paths;
}

TEST(HostileFile, TfRecordsPlainAndGzip) {
  const test::TempDir t;
  expect_cli_refuses(t.file(""), expect_all_refused(t, tfrecord_files()));
}

TEST(HostileFile, Npy) {
  const test::TempDir t;
  expect_cli_refuses(t.file(""), expect_all_refused(t, npy_files()));
}

TEST(HostileFile, Safetensors) {
  const test::TempDir t;
  const auto paths = expect_all_refused(t, safetensors_files());
  // `crest validate` reads datasets, not weights: inspect is the command for safetensors.
  for (const auto& p : paths) {
    const auto r =
        test::run_shell("timeout 20 " + std::string(CREST_BINARY) + " inspect " + p + " 2>&1");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("crest: error: " + p), std::string::npos) << r.out;
  }
}

TEST(HostileFile, Hdf5Samples) {
  const test::TempDir t;
  // Truncated: a real sample cut in half.
  const std::string truncated = t.file("data-truncated.h5");
  const std::vector<float> data(size_t{48}, 0.5F), labels(size_t{24}, 1.0F);  // 4x6x2, 4x6
  write_deepcam_sample(truncated, {4, 6, 2}, data.data(), labels.data());
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  // A shape of 2^38 bytes the file does not store; a chunk libhdf5 would read out of bounds.
  const std::string unbacked = t.file("data-unbacked.h5");
  test::write_unbacked_hdf5(unbacked, {65536, 65536, 16});
  const std::string chunk = t.file("data-chunk.h5");
  fs::copy_file(
      std::string(CREST_SOURCE_DIR) + "/tests/fixtures/hostile/hdf5_unfiltered_chunk_too_short.h5",
      chunk);
  // Wrong magic: the signature's first byte changed.
  const std::string magic = t.file("data-magic.h5");
  Bytes b = test::read_file_bytes(chunk);
  b[0] = std::byte{0x88};
  test::write_file_bytes(magic, b);

  expect_refused_within_bound(truncated, truncated);
  expect_refused_within_bound(magic, "unknown format");
  // inspect lists datasets without reading them: the unbacked and chunk files are listed.
  for (const auto& p : {unbacked, chunk}) {
    const test::AllocationCounter counter;
    EXPECT_NO_THROW((void)inspect_file(p));
    EXPECT_LE(counter.stats().largest, uint64_t{1} << 20);
  }
  // libhdf5 crashes on this one (docs/security.md): contained in the reader process, an error.
  const std::string segv = t.file("data-segv.h5");
  fs::copy_file(
      std::string(CREST_SOURCE_DIR) + "/tests/fixtures/hostile/libhdf5-1.10.8-segv-local-heap.h5",
      segv);
  expect_cli_refuses(t.file(""), {truncated, magic, segv}, true);
  expect_cli_refuses(t.file(""), {unbacked, chunk}, false);
}

// ---- libhdf5's own crashes (docs/security.md, "Inside libhdf5"): contained in the reader ----

const std::string kHostileDir = std::string(CREST_SOURCE_DIR) + "/tests/fixtures/hostile/";

// A DeepCAM dataset of 16x16x2 samples (the smallest height and width DeepCAM takes): training
// files data-00000N.h5 for each N in `train` and 2 validation files, stats.h5.
void write_small_deepcam(const std::string& root, const std::vector<int>& train) {
  fs::create_directories(root + "/train");
  fs::create_directories(root + "/validation");
  const DeepcamSampleShape shape{16, 16, 2};
  std::vector<float> data(size_t{16} * 16 * 2), labels(size_t{16} * 16);
  auto write = [&](const std::string& path, int i) {
    for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<float>((k * 7 + i) % 11) - 5;
    for (size_t k = 0; k < labels.size(); ++k) labels[k] = static_cast<float>((k + i) % 3);
    write_deepcam_sample(path, shape, data.data(), labels.data());
  };
  for (const int i : train) write(root + "/train/data-00000" + std::to_string(i) + ".h5", i);
  for (const int i : {0, 1}) write(root + "/validation/data-00000" + std::to_string(i) + ".h5", i);
  write_deepcam_stats(root + "/stats.h5", {12, {-5, -5}, {5, 5}, {0, 0}, {8, 8}});
}

TEST(HostileFile, Libhdf5CrashesAreErrorsNamingTheFileNotCrashesOfCrest) {
  const test::TempDir t;
  const std::string segv = t.file("data-segv.h5"), overflow = t.file("data-overflow.h5");
  fs::copy_file(kHostileDir + "libhdf5-1.10.8-segv-local-heap.h5", segv);
  fs::copy_file(kHostileDir + "libhdf5-1.10.8-heap-overflow-select-read.h5", overflow);
  // inspect: libhdf5 crashes while resolving the first group (exit 139 before the reader).
  auto r =
      test::run_shell("timeout 20 " + std::string(CREST_BINARY) + " inspect " + segv + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("crest: error: " + segv +
                       ": libhdf5 crashed reading it (SIGSEGV): the file is damaged or hostile"),
            std::string::npos)
      << r.out;
  // validate reads every sample: both files are listed as bad, the good one beside them is read,
  // and the run ends with the usual exit 2 for a dataset with bad files.
  const std::vector<float> data(48, 0.5F), labels(24, 1.0F);
  write_deepcam_sample(t.file("data-good.h5"), {4, 6, 2}, data.data(), labels.data());
  r = test::run_shell("timeout 60 " + std::string(CREST_BINARY) + " validate " + t.file("") +
                      " --threads 2 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data-segv.h5: libhdf5 crashed reading it (SIGSEGV)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("data-overflow.h5: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 bad files"), std::string::npos) << r.out;
  // Found by the fuzz_hdf5 campaign of this tree, also contained: another SIGSEGV in
  // H5F__accum_read, under H5Dopen of climate/data (crest's probe of the sample).
  // And a group B-tree whose lookup recurses until the stack overflows (H5B_find).
  for (const char* name :
       {"libhdf5-1.10.8-segv-dataset-open.h5", "libhdf5-1.10.8-stack-overflow-group-btree.h5"}) {
    const std::string file = t.file(std::string("data-") + name);
    fs::copy_file(kHostileDir + name, file);
    r = test::run_shell("timeout 20 " + std::string(CREST_BINARY) + " inspect " + file + " 2>&1");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(file + ": libhdf5 crashed reading it (SIGSEGV)"), std::string::npos)
        << r.out;
  }
}

// Training on a directory holding both fixtures among its training files (samples 4 and 5 of 10,
// in the second batch of 4; samples 8 and 9 are the spares): refused naming one of them
// (data.on_error: fail), or both skipped and counted (skip); never a crash of crest. libhdf5
// crashes on the first while opening it; the second is refused for its 4x6x2 shape, whose read
// would be the one that overflows. Then crest predict with the crash file among the validation
// files.
TEST(HostileFile, TrainingAndPredictRefuseOrSkipTheLibhdf5CrashFiles) {
  const test::TempDir t;
  const std::string root = t.file("cam");
  write_small_deepcam(root, {0, 1, 2, 3, 6, 7, 8, 9});
  const std::string segv = root + "/train/data-000004.h5";
  fs::copy_file(kHostileDir + "libhdf5-1.10.8-segv-local-heap.h5", segv);
  fs::copy_file(kHostileDir + "libhdf5-1.10.8-heap-overflow-select-read.h5",
                root + "/train/data-000005.h5");
  const std::string cfg = t.file("cam.yaml");
  std::ofstream(cfg) << "output_dir: " << t.file("run") << R"(
data:
  name: deepcam
  data_dir_prefix: )" << root
                     << R"(
  sample_shape: [16, 16, 2]
  batch_size: 4
  n_epochs: 1
  shuffle: false
model:
  name: graph
  inputs:
    - {name: x, shape: [2, 16, 16], layout: channels_last}
    - {name: y, shape: [16, 16], integer: true}
  layers:
    - {name: logits, kind: conv, out_channels: 3, kernel: [3, 3], same: true}
    - {name: loss, kind: softmax_cross_entropy, inputs: [logits, y]}
  outputs: [logits]
  loss: loss
optimizer: {name: Adam, lr: 0.01}
crest: {threads: 1}
)";
  const std::string train = "timeout 120 " + std::string(CREST_BINARY) + " train --config " + cfg;
  // The loader's threads read both files of the batch; whichever error comes first stops the run.
  auto r = test::run_shell(train + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(r.out.find("crest: error: epoch 1: " + segv +
                         ": libhdf5 crashed reading it (SIGSEGV)") != std::string::npos ||
              r.out.find("crest: error: epoch 1: " + root +
                         "/train/data-000005.h5: sample is 4x6x2") != std::string::npos)
      << r.out;
  const std::string weights = t.file("w.safetensors");
  r = test::run_shell(train + " --overwrite --save-weights " + weights +
                      " data.on_error=skip 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 bad samples skipped"), std::string::npos) << r.out;
  // crest predict on the validation split with the crash file among it: refused naming it, no
  // output; with --skip-bad the other files are predicted.
  const std::string bad_valid = root + "/validation/data-000002.h5";
  fs::copy_file(segv, bad_valid);
  const std::string predict = "timeout 120 " + std::string(CREST_BINARY) + " predict --config " +
                              cfg + " --weights " + weights + " --out " + t.file("p.h5");
  r = test::run_shell(predict + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(bad_valid + ": libhdf5 crashed reading it (SIGSEGV)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(t.file("p.h5")));
  r = test::run_shell(predict + " --skip-bad 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(1 bad files skipped)"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(t.file("p.h5")));
}

}  // namespace
}  // namespace crest
