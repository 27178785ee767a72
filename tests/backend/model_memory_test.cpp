// Model memory belongs to the backend: parameters, gradients, the activation arena and optimizer
// state are allocated through its memory resource, and everything that touches them on the host
// (initialisation, weights, checkpoints) goes through explicit copies when the resource is not
// host memory, with the very same bits as on the reference backend. A kernel the backend cannot
// create is refused at compile time, naming the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "crest/core/error.hpp"
#include "crest/engine/weights.hpp"
#include "crest/graph/executor.hpp"
#include "crest/optim/optimizer.hpp"
#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/counting_backend.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

struct Trainee {
  test::SmallModel model = test::branchy_model();
  std::unique_ptr<Executor> ex;
  SgdKeras opt{0.9};
  explicit Trainee(Backend& backend) {
    CompileOptions co;
    co.batch = 2;
    co.seed = 5;
    ex = std::make_unique<Executor>(model.graph, backend, co);
    opt.attach(ex->params(), ex->vec());
  }
  // Inputs written through the backend's resource, as a trainer does for device memory.
  void step(MemoryResource& memory) {
    for (const char* name : {"x", "y"}) {
      const TensorView t = ex->input(name);
      std::vector<float> host(static_cast<size_t>(t.numel()));
      for (size_t i = 0; i < host.size(); ++i) host[i] = std::sin(0.3f * static_cast<float>(i));
      memory.copy_to_device(t.data(), host.data(), t.bytes());
    }
    ex->forward(true);
    ex->backward();
    opt.step(0.05);
  }
};

bool same_bytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

TEST(ModelMemory, ParametersArenaAndOptimizerStateComeFromTheBackend) {
  test::CountingBackend backend;
  Trainee run(backend);
  test::CountingMemory& m = backend.memory();
  EXPECT_EQ(&run.ex->params().memory(), &m);
  EXPECT_TRUE(m.owns(run.ex->params().values()));
  EXPECT_TRUE(m.owns(run.ex->params().grads()));
  EXPECT_TRUE(m.owns(run.ex->input("x").data()));  // the arena
  for (const auto& [name, buffer] : run.opt.state()) {
    EXPECT_EQ(&buffer->memory(), &m) << name;
    EXPECT_TRUE(m.owns(buffer->data())) << name;
  }
  // Host memory: nothing is staged, the step copies nothing.
  run.step(m);
  EXPECT_EQ(m.copies_to_host, 0);
}

TEST(ModelMemory, DeviceMemoryGivesTheReferenceBitsThroughExplicitCopies) {
  auto reference = make_backend("reference");
  test::CountingBackend device(/*pretend_device=*/true);
  Trainee a(*reference), b(device);
  const ParamStore &pa = a.ex->params(), &pb = b.ex->params();
  ASSERT_EQ(pa.bytes(), pb.bytes());
  EXPECT_GT(device.memory().copies_to_device, 0);  // initialised on the host, then copied
  EXPECT_TRUE(same_bytes(pa.values(), pb.values(), pa.bytes()));
  for (int s = 0; s < 2; ++s) {
    a.step(reference->memory());
    b.step(device.memory());
  }
  EXPECT_TRUE(same_bytes(pa.values(), pb.values(), pa.bytes()));

  test::TempDir dir;
  const int to_host = device.memory().copies_to_host;
  save_weights(pa, dir.file("a.safetensors"));
  save_weights(pb, dir.file("b.safetensors"));
  EXPECT_GT(device.memory().copies_to_host, to_host);
  EXPECT_EQ(test::slurp(dir.file("a.safetensors")), test::slurp(dir.file("b.safetensors")));

  CheckpointInfo info;
  info.optimizer = "sgd";
  const std::string ca = write_checkpoint(dir.file("ca"), info, pa, a.opt, 1);
  const std::string cb = write_checkpoint(dir.file("cb"), info, pb, b.opt, 1);
  EXPECT_EQ(test::slurp(ca), test::slurp(cb));

  // Loading goes back through copy_to_device: a fresh model gets the trained bits.
  Trainee c(device);
  const int to_device = device.memory().copies_to_device;
  read_checkpoint(cb, c.ex->params(), c.opt);
  EXPECT_GT(device.memory().copies_to_device, to_device);
  EXPECT_TRUE(same_bytes(pa.values(), c.ex->params().values(), pa.bytes()));
  EXPECT_TRUE(same_bytes(a.opt.state()[0].second->data(), c.opt.state()[0].second->data(),
                         a.opt.state()[0].second->bytes()));
  Trainee d(device);
  load_weights(d.ex->params(), dir.file("a.safetensors"));
  EXPECT_TRUE(same_bytes(pa.values(), d.ex->params().values(), pa.bytes()));
}

TEST(ModelMemory, AKernelTheBackendCannotCreateIsRefusedNamingTheLayer) {
  test::CountingBackend backend(false, /*refuse_conv=*/true);
  test::SmallModel m = test::branchy_model();
  try {
    Executor ex(m.graph, backend, CompileOptions{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(what.find("layer 'conv1' (conv)"), std::string::npos) << what;
    EXPECT_NE(what.find("backend 'counting' cannot create a convolution: this test backend runs "
                        "no convolutions"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace crest
