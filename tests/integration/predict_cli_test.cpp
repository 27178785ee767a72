// crest predict's bad input: every refusal exits 2 naming the file or tensor, and leaves no new
// output (an existing one unchanged). The good path (metrics equal to train's, MPI rows, DeepCAM
// masks) is checked with h5py in tests/interop/predict_interop.py.
#include <gtest/gtest.h>

#include <fstream>

#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"

namespace crest::test {
namespace {

// A tiny CosmoFlow dataset (32^3, 4 validation files) and weights trained on it for one epoch.
class PredictCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const CliRun data = run_crest("datagen cosmoflow --out " + d.file("data") +
                                  " --train 4 --valid 4 --size 32 --seed 5");
    ASSERT_EQ(data.code, 0) << data.out;
    const CliRun train =
        run_crest("train " + model + " data.n_epochs=1 output_dir=" + d.file("run") +
                  " --save-weights " + d.file("w.safetensors"));
    ASSERT_EQ(train.code, 0) << train.out;
  }
  CliRun predict(const std::string& args) { return run_crest("predict " + model + " " + args); }

  TempDir d;
  const std::string model = "--config " + source_path("configs/cosmoflow-demo.yaml") +
                            " data.name=cosmo data.data_dir=" + d.file("data") +
                            " data.n_train=4 data.n_valid=4 data.batch_size=2"
                            " data.sample_shape=[32,32,32,4] model.input_shape=[32,32,32,4]"
                            " model.conv_size=4 model.n_conv_layers=2 crest.threads=2";
};

TEST_F(PredictCli, WritesOneRowPerFileAndTheSummary) {
  const CliRun r = predict("--weights " + d.file("w.safetensors") + " --out " + d.file("p.h5"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("predict: 4 samples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| mae "), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d.file("p.h5")));
}

TEST_F(PredictCli, AnExistingOutputIsRefusedWithoutOverwriteAndKept) {
  std::ofstream(d.file("p.h5")) << "precious";
  const std::string args = "--weights " + d.file("w.safetensors") + " --out " + d.file("p.h5");
  const CliRun r = predict(args);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(d.file("p.h5") + ": exists; --overwrite"), std::string::npos) << r.out;
  EXPECT_EQ(read_text(d.file("p.h5")), "precious");
  const CliRun again = predict(args + " --overwrite");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(read_text(d.file("p.h5")), "precious");
}

TEST_F(PredictCli, AnUnwritableOutputIsRefusedBeforeAnyWork) {
  const CliRun r =
      predict("--weights " + d.file("w.safetensors") + " --out " + d.file("missing/p.h5"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("missing"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("predict: "), std::string::npos) << "it worked before refusing: " << r.out;
  const CliRun dir = predict("--weights " + d.file("w.safetensors") + " --out " + d.file("data"));
  EXPECT_EQ(dir.code, 2) << dir.out;
  EXPECT_NE(dir.out.find("is a directory"), std::string::npos) << dir.out;
}

TEST_F(PredictCli, MissingOrForeignWeightsNameTheFileAndTheTensor) {
  const CliRun missing =
      predict("--weights " + d.file("nope.safetensors") + " --out " + d.file("p.h5"));
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("nope.safetensors"), std::string::npos) << missing.out;
  // Weights of a wider network: conv1 has 8 filters there, 4 here.
  const CliRun other = run_crest("train " + model +
                                 " model.conv_size=8 data.n_epochs=1 output_dir=" + d.file("run8") +
                                 " --save-weights " + d.file("w8.safetensors"));
  ASSERT_EQ(other.code, 0) << other.out;
  const CliRun foreign =
      predict("--weights " + d.file("w8.safetensors") + " --out " + d.file("p.h5"));
  EXPECT_EQ(foreign.code, 2) << foreign.out;
  EXPECT_NE(foreign.out.find("w8.safetensors"), std::string::npos) << foreign.out;
  EXPECT_NE(foreign.out.find("conv"), std::string::npos) << foreign.out;
  EXPECT_FALSE(fs::exists(d.file("p.h5")));
  const CliRun neither = predict("--out " + d.file("p.h5"));
  EXPECT_EQ(neither.code, 2) << neither.out;
}

TEST_F(PredictCli, ACorruptSampleFailsWithoutOutputUnlessSkipped) {
  const std::string bad = d.file("data/validation/sample-000002.tfrecord");
  std::ofstream(bad, std::ios::trunc) << "not a tfrecord";
  const std::string args = "--weights " + d.file("w.safetensors") + " --out " + d.file("p.h5");
  const CliRun r = predict(args);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("sample-000002.tfrecord"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d.file("p.h5")));
  for (const auto& e : fs::directory_iterator(d.file(".")))
    EXPECT_EQ(e.path().filename().string().find("p.h5"), std::string::npos)
        << "a temporary file was left: " << e.path();
  const CliRun skipped = predict(args + " --skip-bad");
  ASSERT_EQ(skipped.code, 0) << skipped.out;
  EXPECT_NE(skipped.out.find("predict: 3 samples (1 bad files skipped)"), std::string::npos)
      << skipped.out;
  EXPECT_NE(skipped.out.find("skipped the bad sample file " + bad), std::string::npos)
      << skipped.out;
}

}  // namespace
}  // namespace crest::test
