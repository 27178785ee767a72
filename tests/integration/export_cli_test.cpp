// crest export from the command line (docs/export.md): weights from a run's checkpoint (its
// directory or the file) and from --save-weights agree; CosmoFlow and DeepCAM export as ONNX
// (the checker runs inside crest before the file is written); bad requests exit 2 with a
// message naming what is wrong, and leave existing files alone. The numerical agreement with
// ONNX Runtime is tests/interop/onnx_interop.py.
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "crest/data/formats/npy.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace crest {
namespace {

using test::run_crest;
using test::TempDir;

// The tiny CosmoFlow of the CLI tests (16^3, two conv blocks): `crest export` with these args.
std::string export_cosmoflow(const std::string& rest) {
  return "export " + test::tiny_cosmoflow_args() + " " + rest;
}

bool onnx_built() {
  TempDir t;
  const auto r = run_crest(export_cosmoflow("--init-seed 1 --out " + t.file("m.onnx")));
  return r.out.find("built without ONNX") == std::string::npos;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TEST(ExportCli, CheckpointDirectoryFileAndSavedWeightsGiveTheSameWeights) {
  TempDir t;
  const auto train =
      run_crest("train " + test::tiny_cosmoflow_args() + " data.n_epochs=1 " +
                "output_dir=" + t.file("run") + " --save-weights " + t.file("trained.safetensors"));
  ASSERT_EQ(train.code, 0) << train.out;
  // A directory: its newest checkpoint.
  auto r = run_crest(export_cosmoflow("--checkpoint " + t.file("run") +
                                      " --format safetensors --out " + t.file("dir.safetensors")));
  ASSERT_EQ(r.code, 0) << r.out;
  test::expect_same_tensors(t.file("trained.safetensors"), t.file("dir.safetensors"));
  // A file: that checkpoint.
  const auto files = std::filesystem::directory_iterator(t.file("run/checkpoints"));
  const std::string ckpt = files->path().string();
  r = run_crest(export_cosmoflow("--checkpoint " + ckpt + " --format safetensors --out " +
                                 t.file("file.safetensors")));
  ASSERT_EQ(r.code, 0) << r.out;
  test::expect_same_tensors(t.file("trained.safetensors"), t.file("file.safetensors"));

  // A checkpoint of another model names the file and the tensor.
  r = run_crest(export_cosmoflow("model.conv_size=8 --checkpoint " + t.file("run") +
                                 " --format safetensors --out " + t.file("other.safetensors")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, ckpt) && contains(r.out, "model/conv1.weight")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(t.file("other.safetensors")));
}

TEST(ExportCli, CosmoflowExportsAsOnnx) {
  if (!onnx_built()) GTEST_SKIP() << "built without ONNX";
  TempDir t;
  const auto r = run_crest(export_cosmoflow("--init-seed 3 --batch 2 --out " + t.file("m.onnx")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "output y")) << r.out;
  const std::string bytes = test::slurp(t.file("m.onnx"));
  // The protobuf holds the op types and initializer names as plain strings.
  for (const char* s : {"Transpose", "Conv", "LeakyRelu", "MaxPool", "Flatten", "Gemm", "Tanh",
                        "conv1.weight", "fc3.bias"})
    EXPECT_TRUE(contains(bytes, s)) << s;
  // crest flattens channels last (the reference's order, which fc1's weights assume): the
  // export transposes before its Flatten (interop.onnx checks the values).
  EXPECT_TRUE(contains(bytes, "flatten.to_channels_last")) << "no transpose before the flatten";
}

TEST(ExportCli, DeepcamExportsAsOnnx) {
  if (!onnx_built()) GTEST_SKIP() << "built without ONNX";
  TempDir t;
  const auto r =
      run_crest("export --config " + test::source_path("configs/deepcam-demo.yaml") +
                " data.sample_shape=[32,48,4] model.input_shape=[32,48,4] crest.threads=2 "
                "--init-seed 3 --out " +
                t.file("m.onnx"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "output logits")) << r.out;
  const std::string bytes = test::slurp(t.file("m.onnx"));
  for (const char* s : {"BatchNormalization", "ConvTranspose", "Expand", "Concat", "Relu", "Add"})
    EXPECT_TRUE(contains(bytes, s)) << s;
}

TEST(ExportCli, MissingWeightsFileIsNamed) {
  TempDir t;
  const auto r = run_crest(export_cosmoflow("--weights " + t.file("none.safetensors") +
                                            " --format safetensors --out " + t.file("m.st")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, t.file("none.safetensors"))) << r.out;
}

TEST(ExportCli, WeightsOfAnotherModelNameTheTensorAndFile) {
  TempDir t;
  auto r = run_crest(
      export_cosmoflow("--init-seed 1 --format safetensors --out " + t.file("small.safetensors")));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_crest(export_cosmoflow("model.conv_size=8 --weights " + t.file("small.safetensors") +
                                 " --format safetensors --out " + t.file("m.st")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, t.file("small.safetensors")) && contains(r.out, "'conv1.weight'"))
      << r.out;
}

// The output is checked first: the missing weights are never looked at.
TEST(ExportCli, UnwritableOutIsRefusedBeforeAnyWork) {
  TempDir t;
  const auto r =
      run_crest(export_cosmoflow("--weights " + t.file("none.safetensors") +
                                 " --format safetensors --out " + t.file("no/such/dir/m.onnx")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "does not exist") && contains(r.out, t.file("no/such/dir"))) << r.out;
  EXPECT_FALSE(contains(r.out, "none.safetensors")) << r.out;
}

TEST(ExportCli, ExistingOutNeedsOverwrite) {
  TempDir t;
  const std::string out = t.file("m.safetensors");
  std::ofstream(out) << "earlier";
  auto r = run_crest(export_cosmoflow("--init-seed 1 --format safetensors --out " + out));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--overwrite")) << r.out;
  EXPECT_EQ(test::slurp(out), "earlier");
  r = run_crest(export_cosmoflow("--init-seed 1 --format safetensors --overwrite --out " + out));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(test::slurp(out), "earlier");
}

TEST(ExportCli, BadRequestsAreUsageErrors) {
  TempDir t;
  // safetensors: these refusals do not depend on the build having ONNX.
  const std::string out = " --format safetensors --out " + t.file("m.onnx");
  const struct {
    std::string args, says;
  } cases[] = {
      {"--init-seed 1 --precision bf16" + out, "bf16 is not supported"},
      {"--init-seed 1 --batch 0" + out, "--batch"},
      {"--init-seed 1 --format tflite --out " + t.file("m.onnx"), "--format"},
      {"--weights a --init-seed 1" + out, "exactly one"},
      {out, "exactly one"},
      {"--init-seed 1 --check-with x.npy" + out, "--check-out"},
      {"--checkpoint " + t.file("") + out, "no checkpoint under"},
  };
  for (const auto& c : cases) {
    const auto r = run_crest(export_cosmoflow(c.args));
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, c.says)) << c.args << "\n" << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(t.file("m.onnx")));
}

TEST(ExportCli, CheckInputOfTheWrongShapeIsNamed) {
  TempDir t;
  const std::vector<float> v(size_t{2} * 8 * 8 * 8 * 4, 0.f);
  write_npy(t.file("x.npy"), DType::f32, {2, 8, 8, 8, 4}, v.data());
  const auto r = run_crest(export_cosmoflow("--init-seed 1 --format safetensors --out " +
                                            t.file("w.st") + " --check-with " + t.file("x.npy") +
                                            " --check-out " + t.file("y.npy")));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, t.file("x.npy")) && contains(r.out, "[N, 16, 16, 16, 4]")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(t.file("y.npy")));
}

}  // namespace
}  // namespace crest
