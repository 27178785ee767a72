// crest.cuda_graphs on a GPU: two programs of one model on the cuda backend, the same weights and
// batches; one queues every step's work, the other records its passes and update from the second
// step on and launches those recordings again (TrainStep::record_passes, StepGraph: a CUDA graph
// per batch buffer, launched without the host queuing its kernels). Six steps of Adam with a rate
// that changes every step and dropout on, on two batch buffers bound in turn (as BatchFeed binds
// its two): every loss, and the weights after every step, are the same bit for bit. Skipped
// where no device is usable (scripts/device-check.sh runs them).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "crest/core/host_staging.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/bound_batches.hpp"
#include "support/fake_communicator.hpp"
#include "support/mirrored_values.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

bool same_weights(Backend& cuda, const Executor& a, const Executor& b) {
  const size_t bytes = a.params().bytes();
  const HostStaging wa(cuda.memory(), static_cast<const void*>(a.params().values()), bytes);
  const HostStaging wb(cuda.memory(), static_cast<const void*>(b.params().values()), bytes);
  return std::memcmp(wa.data(), wb.data(), bytes) == 0;
}

// Two programs of one small CosmoFlow (dropout on) on the cuda backend, with the same weights and
// two batch buffers each.
struct QueuedAndRecorded {
  QueuedAndRecorded(Backend& backend, uint64_t seed)
      : cuda(backend),
        m(build_cosmoflow(test::small_cosmoflow(32, 2, /*dropout=*/0.5))),
        queued(m.graph, cuda, options(seed)),
        recorded(m.graph, cuda, options(seed)) {}
  static CompileOptions options(uint64_t seed) {
    CompileOptions o;
    o.batch = 2;
    o.seed = seed;
    return o;
  }
  // Six steps at lr(s), the buffers bound in turn (as BatchFeed binds its two), the second
  // program's passes recorded: every loss and the weights after every step bit for bit.
  void train(TrainStep& queued_step, TrainStep& recorded_step, double (*lr)(int)) {
    ASSERT_TRUE(same_weights(cuda, queued, recorded));
    recorded_step.record_passes();
    for (int s = 0; s < 6; ++s) {
      queued_batches.bind(queued, s % 2);
      recorded_batches.bind(recorded, s % 2);
      EXPECT_EQ(recorded_step.run(lr(s)).loss, queued_step.run(lr(s)).loss) << "step " << s;
      EXPECT_TRUE(same_weights(cuda, queued, recorded)) << "step " << s;
    }
    // Batches A B A B A B: A queued, B and A recorded, then launched again.
    EXPECT_EQ(recorded_step.recorded_steps(), 2);
    EXPECT_EQ(recorded_step.replayed_steps(), 3);
  }
  Backend& cuda;
  const CosmoFlowModel m;
  Executor queued, recorded;
  const test::BoundBatches queued_batches{queued, 2}, recorded_batches{recorded, 2};
};

TEST(CudaStepGraph, ARecordedStepTrainsAsTheQueuedStepBitForBit) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  QueuedAndRecorded p(*cuda, 5);
  Adam queued_adam(0.9, 0.999, 1e-8, 0.0, false), recorded_adam(0.9, 0.999, 1e-8, 0.0, false);
  queued_adam.attach(p.queued.params(), p.queued.vec());
  recorded_adam.attach(p.recorded.params(), p.recorded.vec());
  TrainStep queued_step(p.queued, queued_adam, nullptr),
      recorded_step(p.recorded, recorded_adam, nullptr);
  p.train(queued_step, recorded_step, [](int s) { return 1e-3 * (s + 1); });
  EXPECT_EQ(recorded_step.recorded_updates(), 1);
  EXPECT_EQ(recorded_step.replayed_updates(), 4);
}

// Graphs over NCCL: each program's buckets go through a one-rank NCCL communicator (the device
// has one GPU, and NCCL refuses two ranks on one) under a GradientSync that counts two ranks (the
// fake job's other rank adds nothing), so every bucket is summed and scaled by 1/2 on the device.
// One program queues every exchange and waits for it; the other records it with the passes
// (GradientSync::queue_finish: NCCL's operations captured into the CUDA graph) and waits after the
// launch.
TEST(CudaStepGraph, AnExchangeRecordedWithNcclTrainsAsTheQueuedExchange) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  const Support nccl = cuda->supports_device_collectives();
  ASSERT_TRUE(nccl) << nccl.reason;
  QueuedAndRecorded p(*cuda, 7);
  Executor &queued = p.queued, &recorded = p.recorded;
  test::FakeCommunicator queued_comm(0, 2), recorded_comm(0, 2);
  GradientSync queued_sync(queued_comm, queued.params(), queued.gradient_ready_order(), 0.05, 0.1),
      recorded_sync(recorded_comm, recorded.params(), recorded.gradient_ready_order(), 0.05, 0.1);
  const auto no_bootstrap = [](void*, size_t) {};  // one rank: nothing to share
  queued_sync.reduce_on_device(cuda->device_collectives(0, 1, no_bootstrap), 60);
  recorded_sync.reduce_on_device(cuda->device_collectives(0, 1, no_bootstrap), 60);
  ASSERT_GT(recorded_sync.buckets().size(), 1U);
  SgdKeras queued_sgd(0.9), recorded_sgd(0.9);
  queued_sgd.attach(queued.params(), queued.vec());
  recorded_sgd.attach(recorded.params(), recorded.vec());
  TrainStep queued_step(queued, queued_sgd, &queued_sync),
      recorded_step(recorded, recorded_sgd, &recorded_sync);
  p.train(queued_step, recorded_step, [](int) { return 0.01; });
  EXPECT_EQ(recorded_sync.stats().steps, 6);
}

}  // namespace
}  // namespace crest
