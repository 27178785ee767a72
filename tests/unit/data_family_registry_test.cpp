// A data family added the way docs/extending.md describes — a writer, a file layout and one
// registration line, here in the test binary — is what `crest datagen` writes and `crest
// validate` finds and checks, with no other file naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/data_family.hpp"
#include "support/cli_util.hpp"

namespace crest {
namespace {
namespace fs = std::filesystem;

// Ramp files: sample i of a split is `length` bytes counting up from (seed + i) mod 256, and the
// root gets ramp.txt naming the sample count.
class RampRun final : public DatagenRun {
 public:
  explicit RampRun(DatagenOptions o) : o_(std::move(o)) {}
  std::string describe() const override { return std::to_string(o_.size) + " ramp bytes"; }
  int64_t write(int /*worker*/, int /*split*/, int64_t index, uint64_t seed,
                const std::string& path) override {
    std::ofstream f(path, std::ios::binary);
    for (int64_t b = 0; b < o_.size; ++b)
      f.put(static_cast<char>((seed + static_cast<uint64_t>(index + b)) % 256));
    return o_.size;
  }
  int64_t finish(const std::string& out) override {
    std::ofstream(fs::path(out) / "ramp.txt") << o_.n_train + o_.n_valid << "\n";
    return 0;
  }

 private:
  const DatagenOptions o_;
};

SampleFileFacts check_ramp(const std::string& path, const ValidateOptions&,
                           std::vector<std::byte>& bytes) {
  bytes.resize(static_cast<size_t>(fs::file_size(path)));
  std::ifstream(path, std::ios::binary)
      .read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  for (size_t b = 1; b < bytes.size(); ++b)
    if (static_cast<uint8_t>(bytes[b]) !=
        static_cast<uint8_t>(static_cast<uint8_t>(bytes[b - 1]) + 1))
      throw_input("byte " + std::to_string(b) + " breaks the ramp");
  SampleFileFacts facts;
  facts.shape = Shape{static_cast<int64_t>(bytes.size())};
  facts.bytes = static_cast<int64_t>(bytes.size());
  return facts;
}

DataFamily ramp_family() {
  DataFamily f;
  f.name = "ramp";
  f.description = "counting bytes";
  f.formats = {"bin"};
  f.root_files = {"ramp.txt"};
  f.check_options = [](const DatagenOptions& o) {
    if (o.gzip) throw_usage("datagen ramp: --gzip is not for ramps");
  };
  f.file_name = [](const DatagenOptions&, int64_t i) {
    return "ramp-" + std::to_string(i) + ".bin";
  };
  f.start = [](const DatagenOptions& o, int) -> std::unique_ptr<DatagenRun> {
    return std::make_unique<RampRun>(o);
  };
  f.layouts = {{"ramp-bin", "ramp-*.bin",
                [](const std::string& n) { return n.rfind("ramp-", 0) == 0; }, check_ramp}};
  return f;
}

CREST_REGISTER_DATA_FAMILY(ramp, ramp_family());

DatagenOptions ramp_options(const std::string& out) {
  DatagenOptions o;
  o.family = "ramp";
  o.out = out;
  o.n_train = 3;
  o.n_valid = 2;
  o.size = 32;
  o.threads = 2;
  return o;
}

TEST(DataFamilyRegistry, DatagenWritesARegisteredFamily) {
  test::TempDir d;
  const DatagenOptions o = ramp_options(d.file("set"));
  std::ostringstream log;
  const DatagenResult r = generate_dataset(o, log);
  EXPECT_EQ(r.files, 5);
  EXPECT_EQ(r.bytes, 5 * 32);
  EXPECT_NE(log.str().find("datagen ramp: 3 train + 2 validation samples of 32 ramp bytes"),
            std::string::npos)
      << log.str();
  EXPECT_EQ(datagen_file_name(o, 2), "ramp-2.bin");
  EXPECT_TRUE(fs::exists(d.file("set/train/ramp-2.bin")));
  EXPECT_TRUE(fs::exists(d.file("set/validation/ramp-1.bin")));
  EXPECT_TRUE(fs::exists(d.file("set/ramp.txt"))) << "its run's finish wrote the root file";

  DatagenOptions again = o;
  again.out = d.file("other");
  fs::create_directories(again.out);
  std::ofstream(d.file("other/ramp.txt")) << "keep\n";
  EXPECT_THROW(generate_dataset(again, log), Error) << "a root file is not replaced";
  DatagenOptions bad = o;
  bad.format = "npy";
  try {
    generate_dataset(bad, log);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("datagen ramp: --format must be bin, got 'npy'"),
              std::string::npos)
        << e.what();
  }
  bad = o;
  bad.gzip = true;
  EXPECT_THROW(generate_dataset(bad, log), Error) << "its own option check ran";
  bad = o;
  bad.family = "nonesuch";
  try {
    generate_dataset(bad, log);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cosmoflow, deepcam, imagenet, ramp"), std::string::npos) << what;
  }
}

TEST(DataFamilyRegistry, ValidateFindsAndChecksItsFiles) {
  test::TempDir d;
  std::ostringstream log;
  generate_dataset(ramp_options(d.file("set")), log);
  ValidateOptions v;
  v.dir = d.file("set");
  v.threads = 2;
  const ValidateReport good = validate_dataset(v, log);
  EXPECT_TRUE(good.ok()) << log.str();
  EXPECT_EQ(good.format, "ramp-bin");
  EXPECT_EQ(good.files, 5);
  EXPECT_EQ(good.sample_shape, Shape{32});

  {  // break one ramp
    std::fstream f(d.file("set/train/ramp-1.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(7);
    f.put('\0');
  }
  v.format = "ramp";
  const ValidateReport bad = validate_dataset(v, log);
  ASSERT_EQ(bad.errors.size(), 1u) << log.str();
  EXPECT_EQ(bad.errors[0].first, d.file("set/train/ramp-1.bin"));
  EXPECT_NE(bad.errors[0].second.find("byte 7 breaks the ramp"), std::string::npos);
  v.format = "cosmoflow";
  EXPECT_THROW(validate_dataset(v, log), Error) << "no cosmoflow files there";
}

}  // namespace
}  // namespace crest
