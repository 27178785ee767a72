// The HDF5 reader process (crest/data/formats/hdf5_reader.hpp): the same bits and the same errors
// as reading in this process; libhdf5's crashes on the hostile fixtures end the reader, not this
// process, and are errors naming the file and the signal; a reader killed mid-read is a clean
// error, and the next request gets a fresh reader.
#include "crest/data/formats/hdf5_reader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/hdf5_in_process.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

const std::string kHostile = std::string(CREST_SOURCE_DIR) + "/tests/fixtures/hostile/";
const std::string kSegvFile = kHostile + "libhdf5-1.10.8-segv-local-heap.h5";
const std::string kOverflowFile = kHostile + "libhdf5-1.10.8-heap-overflow-select-read.h5";

// The error `fn` throws (fails the test when it throws none).
template <typename Fn>
Error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no crest::Error";
  return Error(ErrorKind::runtime, "");
}

class Hdf5Reader : public ::testing::Test {
 protected:
  static constexpr DeepcamSampleShape kShape{5, 7, 3};

  void SetUp() override {
    ASSERT_TRUE(hdf5_reads_isolated()) << "CREST_HDF5_IN_PROCESS is set";
    // Values whose bits a conversion would change: negative zero, subnormals, odd mantissas.
    data_.resize(static_cast<size_t>(kShape.height * kShape.width * kShape.channels));
    for (size_t i = 0; i < data_.size(); ++i)
      data_[i] = i == 0 ? -0.0f : static_cast<float>(i) * 1.0000001f - 17.3f;
    data_[1] = 1e-40f;
    labels_.resize(static_cast<size_t>(kShape.height * kShape.width));
    for (size_t i = 0; i < labels_.size(); ++i) labels_[i] = static_cast<float>(i % 3);
    good_ = dir_.file("data-good.h5");
    write_deepcam_sample(good_, kShape, data_.data(), labels_.data());
  }

  // Reads the good file through the reader and checks it against what was written.
  void expect_good_file_reads() {
    std::vector<float> data(data_.size());
    std::vector<int32_t> labels(labels_.size());
    read_deepcam_sample(good_, kShape, data.data(), labels.data());
    EXPECT_EQ(std::memcmp(data.data(), data_.data(), data.size() * sizeof(float)), 0);
    for (size_t i = 0; i < labels.size(); ++i)
      ASSERT_EQ(labels[i], static_cast<int32_t>(labels_[i])) << i;
  }

  test::ScratchDir dir_;
  std::vector<float> data_, labels_;
  std::string good_;
};

TEST_F(Hdf5Reader, GoodFileReadsBitIdenticallyThroughTheReaderAndInProcess) {
  EXPECT_EQ(probe_deepcam_sample(good_), kShape);
  const int pid = hdf5_reader_pid();
  EXPECT_GT(pid, 0);
  EXPECT_NE(pid, ::getpid());
  std::vector<float> isolated(data_.size()), local(data_.size());
  std::vector<int32_t> isolated_labels(labels_.size()), local_labels(labels_.size());
  read_deepcam_sample(good_, kShape, isolated.data(), isolated_labels.data());
  hdf5_in_process::read_deepcam_sample(good_, kShape, local.data(), local_labels.data());
  EXPECT_EQ(std::memcmp(isolated.data(), local.data(), local.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(isolated.data(), data_.data(), data_.size() * sizeof(float)), 0);
  EXPECT_EQ(isolated_labels, local_labels);
  // Labels only, then data only: the other buffer is left alone.
  std::vector<float> untouched(data_.size(), 42.0f);
  std::vector<int32_t> labels(labels_.size(), -1);
  read_deepcam_sample(good_, kShape, nullptr, labels.data());
  EXPECT_EQ(labels, local_labels);
  read_deepcam_sample(good_, kShape, untouched.data(), nullptr);
  EXPECT_EQ(untouched, local);
  // A larger sample after a smaller one: the shared memory grows.
  const DeepcamSampleShape big{40, 30, 4};
  std::vector<float> big_data(size_t{40} * 30 * 4), big_labels(size_t{40} * 30, 2.0f),
      back(big_data.size());
  for (size_t i = 0; i < big_data.size(); ++i) big_data[i] = static_cast<float>(i);
  write_deepcam_sample(dir_.file("big.h5"), big, big_data.data(), big_labels.data());
  read_deepcam_sample(dir_.file("big.h5"), big, back.data(), nullptr);
  EXPECT_EQ(back, big_data);
  EXPECT_EQ(hdf5_reader_pid(), pid) << "one reader serves every request";
  // The statistics file and the listing.
  DeepcamStats stats;
  stats.count = 12;
  stats.minval = {-1, -2};
  stats.maxval = {1, 2};
  stats.mean = {0.25f, 0.5f};
  stats.sqmean = {0.125f, 1e-30f};
  write_deepcam_stats(dir_.file("stats.h5"), stats);
  const DeepcamStats s = read_deepcam_stats(dir_.file("stats.h5"));
  EXPECT_EQ(s.count, 12);
  EXPECT_EQ(s.minval, stats.minval);
  EXPECT_EQ(s.maxval, stats.maxval);
  EXPECT_EQ(s.mean, stats.mean);
  EXPECT_EQ(s.sqmean, stats.sqmean);
  EXPECT_EQ(describe_hdf5(good_), hdf5_in_process::describe_hdf5(good_));
}

// A spatial split's block of a sample: only its hyperslab, through the reader and in process,
// equal to the block of the whole sample; a window outside the sample is refused alike.
TEST_F(Hdf5Reader, AWindowOfTheDataReadsAsTheBlockOfTheWholeSample) {
  const DeepcamWindow w{1, 4, 2, 7};  // rows 1..3, columns 2..6
  const auto C = static_cast<size_t>(kShape.channels);
  std::vector<float> want;
  for (int64_t h = w.h0; h < w.h1; ++h)
    for (int64_t x = w.w0; x < w.w1; ++x)
      for (size_t c = 0; c < C; ++c)
        want.push_back(data_[static_cast<size_t>(h * kShape.width + x) * C + c]);
  std::vector<float> isolated(want.size()), local(want.size());
  read_deepcam_data_block(good_, kShape, w, isolated.data());
  hdf5_in_process::read_deepcam_data_block(good_, kShape, w, local.data());
  EXPECT_EQ(std::memcmp(isolated.data(), want.data(), want.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(local.data(), want.data(), want.size() * sizeof(float)), 0);
  for (const DeepcamWindow bad : {DeepcamWindow{0, 6, 0, 7}, DeepcamWindow{2, 2, 0, 7}}) {
    std::vector<float> out(static_cast<size_t>(kShape.height * kShape.width) * C);
    const Error e = error_of([&] { read_deepcam_data_block(good_, kShape, bad, out.data()); });
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_NE(std::string(e.what()).find(good_), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.str()), std::string::npos) << e.what();
  }
  expect_good_file_reads();  // the reader still serves after a refused request
}

TEST_F(Hdf5Reader, ErrorsKeepTheirKindAndText) {
  const std::string cut = dir_.file("data-cut.h5");
  fs::copy_file(good_, cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  const std::string text = dir_.file("data-text.h5");
  test::write_file_bytes(text, test::bytes_of("not HDF5 at all"));
  std::vector<float> data(data_.size());
  std::vector<int32_t> labels(labels_.size());
  const DeepcamSampleShape wrong{5, 7, 4};
  for (const std::string& path : {cut, text, dir_.file("absent.h5")}) {
    const Error isolated = error_of([&] { (void)probe_deepcam_sample(path); });
    const Error local = error_of([&] { (void)hdf5_in_process::probe_deepcam_sample(path); });
    EXPECT_EQ(isolated.kind(), local.kind()) << local.what();
    EXPECT_STREQ(isolated.what(), local.what());
    const Error stats = error_of([&] { (void)read_deepcam_stats(path); });
    EXPECT_STREQ(stats.what(),
                 error_of([&] { (void)hdf5_in_process::read_deepcam_stats(path); }).what());
  }
  const Error isolated = error_of([&] { read_deepcam_sample(good_, wrong, data.data(), nullptr); });
  const Error local =
      error_of([&] { hdf5_in_process::read_deepcam_sample(good_, wrong, data.data(), nullptr); });
  EXPECT_EQ(isolated.kind(), ErrorKind::input);
  EXPECT_STREQ(isolated.what(), local.what());
  EXPECT_NE(std::string(isolated.what()).find("expected 5x7x4"), std::string::npos);
  expect_good_file_reads();
}

// libhdf5 1.10.8 dereferences a null pointer on this file (docs/security.md): in the reader.
TEST_F(Hdf5Reader, LibhdfCrashIsAnErrorNamingTheFileAndTheSignalAndTheNextFileReads) {
  const std::string segv = dir_.file("data-segv.h5");
  fs::copy_file(kSegvFile, segv);
  expect_good_file_reads();
  const int before = hdf5_reader_pid();
  for (const auto& read : std::vector<std::function<void()>>{
           [&] { (void)probe_deepcam_sample(segv); }, [&] { (void)describe_hdf5(segv); }}) {
    const Error e = error_of(read);
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_EQ(std::string(e.what()), segv +
                                         ": libhdf5 crashed reading it (SIGSEGV): the file is "
                                         "damaged or hostile");
    EXPECT_EQ(hdf5_reader_pid(), -1) << "the crashed reader is reaped";
  }
  expect_good_file_reads();
  EXPECT_NE(hdf5_reader_pid(), before);
}

// libhdf5 1.10.8 writes past a buffer on this file (ASan: heap-buffer-overflow in
// H5VM_memcpyvv). Whatever that does to the reader (here, without ASan, it crashes it), this
// process is untouched: the read is an error naming the file, or returns what libhdf5 read; and a
// good file read afterwards, by the same reader or a new one, has the right bits.
TEST_F(Hdf5Reader, LibhdfOverflowStaysInTheReader) {
  const std::string overflow = dir_.file("data-overflow.h5");
  fs::copy_file(kOverflowFile, overflow);
  const DeepcamSampleShape shape = probe_deepcam_sample(overflow);
  EXPECT_EQ(shape, (DeepcamSampleShape{4, 6, 2}));
  std::vector<float> data(size_t{4} * 6 * 2);
  std::vector<int32_t> labels(size_t{4} * 6);
  try {
    read_deepcam_sample(overflow, shape, data.data(), labels.data());
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(overflow + ": ", 0), 0u) << e.what();
  }
  expect_good_file_reads();
}

// The test hook kills every reader asked for the doomed file, so the one retry with a fresh reader
// (for a reader ended from outside) is killed too.
TEST_F(Hdf5Reader, ReaderKilledMidReadIsACleanErrorAndTheNextReadStartsANewOne) {
  expect_good_file_reads();
  ASSERT_EQ(::setenv("CREST_TEST_HDF5_READER_KILL", "data-doomed", 1), 0);
  stop_hdf5_reader();  // the next reader starts with the variable set
  const std::string doomed = dir_.file("data-doomed.h5");
  fs::copy_file(good_, doomed);
  std::vector<float> data(data_.size());
  const Error e = error_of([&] { read_deepcam_sample(doomed, kShape, data.data(), nullptr); });
  ::unsetenv("CREST_TEST_HDF5_READER_KILL");
  EXPECT_EQ(e.kind(), ErrorKind::runtime)
      << "a reader killed from outside says nothing of the file";
  EXPECT_EQ(std::string(e.what()),
            doomed + ": the HDF5 reader process ended (SIGKILL) while reading it, twice");
  EXPECT_EQ(hdf5_reader_pid(), -1);
  expect_good_file_reads();
  stop_hdf5_reader();  // later tests get a reader without the variable
}

// The reader outlives the thread that started it (crest validate's workers end after their files;
// a reader tied to its starting thread, as PR_SET_PDEATHSIG ties it, was killed with it).
TEST_F(Hdf5Reader, ReaderStartedByAThreadThatEndedKeepsServing) {
  stop_hdf5_reader();
  std::thread([&] { EXPECT_EQ(probe_deepcam_sample(good_), kShape); }).join();
  const int pid = hdf5_reader_pid();
  ASSERT_GT(pid, 0);
  expect_good_file_reads();
  EXPECT_EQ(hdf5_reader_pid(), pid);
}

// A reader ended from outside while idle (here SIGKILL, as the OOM killer sends): the next
// request is served by a fresh reader, without an error.
TEST_F(Hdf5Reader, ReaderKilledWhileIdleIsReplacedWithoutAnError) {
  expect_good_file_reads();
  const int pid = hdf5_reader_pid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  expect_good_file_reads();
  EXPECT_GT(hdf5_reader_pid(), 0);
  EXPECT_NE(hdf5_reader_pid(), pid);
}

// An executable that is not a reader is an error naming it, and the right one works again after.
TEST_F(Hdf5Reader, AnExecutableThatIsNotAReaderIsAnErrorNamingIt) {
  const std::string crest = std::getenv("CREST_HDF5_READER");
  stop_hdf5_reader();
  ASSERT_EQ(::setenv("CREST_HDF5_READER", "/bin/false", 1), 0);
  const Error e = error_of([&] { (void)probe_deepcam_sample(good_); });
  ASSERT_EQ(::setenv("CREST_HDF5_READER", crest.c_str(), 1), 0);
  EXPECT_EQ(e.kind(), ErrorKind::runtime);
  EXPECT_EQ(std::string(e.what()),
            "the HDF5 reader (/bin/false __hdf5-reader) did not start (exit status 1)");
  EXPECT_EQ(hdf5_reader_pid(), -1);
  expect_good_file_reads();
}

}  // namespace
}  // namespace crest
