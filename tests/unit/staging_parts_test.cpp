// Staging a file's parts (StageOptions::parts, a spatial split's blocks): the parts' bytes at
// their own offsets and holes between, in a file of the source's size that reads as the source
// where the parts are; the manifest names the parts, and a staging is reused only for the same.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/staging.hpp"
#include "data_formats_test_util.hpp"
#include "support/fake_communicator.hpp"

namespace crest {
namespace {

const std::vector<int64_t> kShape{8, 4, 4, 2};  // depth rows first, as a CosmoFlow volume

class StagingParts : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(src_ + "/train");
    std::vector<int16_t> volume(size_t{8} * 4 * 4 * 2);
    for (size_t i = 0; i < volume.size(); ++i) volume[i] = static_cast<int16_t>(i * 3 + 1);
    write_npy(src_ + "/train/a.data.npy", DType::i16, kShape, volume.data());
    const std::vector<float> targets{1, 2, 3, 4};
    write_npy(src_ + "/train/a.label.npy", DType::f32, {4}, targets.data());
  }

  // Rows [begin, end) of the volume and its header; the labels whole.
  StageOptions rows(int64_t begin, int64_t end) const {
    StageOptions o;
    o.from = src_;
    o.to = dst_;
    o.parts = [begin, end](const std::string& path, uint64_t) {
      if (path.find(".data.npy") == std::string::npos) return std::vector<ByteRange>{};
      const NpyHeader h = read_npy_header(path);
      std::vector<ByteRange> ranges = npy_block_ranges(h, {begin}, {end});
      ranges.push_back({0, h.data_offset});
      return ranges;
    };
    o.parts_text = "rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
    return o;
  }

  StageResult stage(const StageOptions& o) {
    test::FakeCommunicator one(0, 1);
    std::ostringstream log;
    return stage_dataset(o, one, log);
  }

  // The staged volume holds the source's bytes of rows [begin, end) (and the header), zeros
  // elsewhere, at the source's size.
  void expect_rows(int64_t begin, int64_t end) const {
    const auto source = test::read_file_bytes(src_ + "/train/a.data.npy");
    const auto staged = test::read_file_bytes(dst_ + "/train/a.data.npy");
    ASSERT_EQ(staged.size(), source.size());
    const uint64_t data = read_npy_header(src_ + "/train/a.data.npy").data_offset;
    const uint64_t row = uint64_t{4} * 4 * 2 * 2;
    for (uint64_t i = 0; i < source.size(); ++i) {
      const bool kept = i < data || (i >= data + begin * row && i < data + end * row);
      ASSERT_EQ(staged[i], kept ? source[i] : std::byte{0}) << "byte " << i;
    }
    EXPECT_EQ(test::read_file_bytes(dst_ + "/train/a.label.npy"),
              test::read_file_bytes(src_ + "/train/a.label.npy"));
  }

  test::ScratchDir dir_;
  std::string src_ = dir_.file("src"), dst_ = dir_.file("dst");
};

TEST_F(StagingParts, StagesOnlyThePartsInAFileThatReadsAsTheSource) {
  const StageResult r = stage(rows(0, 3));
  EXPECT_EQ(r.partial_files, 1);
  expect_rows(0, 3);
  const uint64_t data = read_npy_header(src_ + "/train/a.data.npy").data_offset;
  EXPECT_EQ(r.bytes_written,
            static_cast<int64_t>(data + uint64_t{3} * 64 + 16 + 128));  // + the labels
  // The staged rows read as the source's.
  std::vector<int16_t> want(size_t{3} * 32), got(size_t{3} * 32);
  read_npy_block_into(src_ + "/train/a.data.npy", DType::i16, kShape, {0}, {3}, want.data());
  read_npy_block_into(dst_ + "/train/a.data.npy", DType::i16, kShape, {0}, {3}, got.data());
  EXPECT_EQ(got, want);
  std::ifstream in(dst_ + "/.crest-stage.json");
  const nlohmann::json m = nlohmann::json::parse(in);
  EXPECT_EQ(m.at("parts"), "rows [0, 3)");
  for (const auto& f : m.at("files"))
    if (f.at("path") == "train/a.data.npy") {
      EXPECT_EQ(f.at("part_bytes").get<int64_t>(), static_cast<int64_t>(data + uint64_t{3} * 64));
    } else {
      EXPECT_FALSE(f.contains("part_bytes")) << f.dump();
    }
}

TEST_F(StagingParts, AStagingIsReusedOnlyForTheSameParts) {
  stage(rows(0, 3));
  EXPECT_TRUE(stage(rows(0, 3)).reused);
  StageOptions whole;
  whole.from = src_;
  whole.to = dst_;
  for (const StageOptions& other : {rows(3, 8), whole}) {
    try {
      stage(other);
      FAIL() << "no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("it holds a staging of rows [0, 3)"), std::string::npos) << what;
      EXPECT_NE(what.find(other.parts ? "with rows [3, 8)" : "with every file whole"),
                std::string::npos)
          << what;
    }
  }
  expect_rows(0, 3);  // untouched
  StageOptions overwrite = rows(3, 8);
  overwrite.overwrite = true;
  EXPECT_EQ(stage(overwrite).partial_files, 1);
  expect_rows(3, 8);
}

// The byte ranges of a block are exactly the bytes read_npy_block_into reads, in file order.
TEST_F(StagingParts, NpyBlockRangesAreTheBytesABlockReadReads) {
  const std::string path = src_ + "/train/a.data.npy";
  const NpyHeader h = read_npy_header(path);
  const auto file = test::read_file_bytes(path);
  for (const auto& [begin, end] :
       {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{2, 0, 0}, {5, 4, 4}},
        {{0, 1, 0}, {8, 3, 4}},
        {{1, 0, 2}, {7, 4, 3}}}) {
    const std::vector<ByteRange> ranges = npy_block_ranges(h, begin, end);
    std::vector<std::byte> from_ranges;
    for (size_t k = 0; k < ranges.size(); ++k) {
      if (k > 0) {
        EXPECT_GT(ranges[k].offset, ranges[k - 1].offset);
      }
      from_ranges.insert(from_ranges.end(),
                         file.begin() + static_cast<std::ptrdiff_t>(ranges[k].offset),
                         file.begin() + static_cast<std::ptrdiff_t>(ranges[k].end()));
    }
    std::vector<std::byte> block(from_ranges.size());
    EXPECT_EQ(read_npy_block_into(path, DType::i16, kShape, begin, end, block.data()),
              from_ranges.size());
    EXPECT_EQ(block, from_ranges);
  }
}

}  // namespace
}  // namespace crest
