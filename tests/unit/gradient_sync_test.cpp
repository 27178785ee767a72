// GradientSync on one process: the bucket layout (contiguous slices in backward's order, every
// trainable gradient exactly once, a small first bucket) and the executor hook that starts each
// bucket as soon as backward has finished its gradients. The arithmetic over real ranks is
// tested under mpirun (tests/mpi/).
#include "crest/dist/gradient_sync.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "support/counting_backend.hpp"
#include "support/fake_communicator.hpp"
#include "support/fake_device_collectives.hpp"
#include "support/host_copy.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

CosmoFlowModel small_cosmoflow() { return build_cosmoflow(test::small_cosmoflow(32, 32)); }

TEST(GradientSync, BucketsAreContiguousSlicesInBackwardOrderCoveringEveryGradientOnce) {
  CosmoFlowModel m = small_cosmoflow();
  auto backend = make_backend("reference");
  Executor ex(m.graph, *backend, CompileOptions{});
  test::FakeCommunicator comm(0, 2);
  const std::vector<int> order = ex.gradient_ready_order();
  // Reverse execution order: the output layer's gradients first, conv1's last.
  const auto& slots = ex.params().slots();
  EXPECT_EQ(slots[static_cast<size_t>(order.front())].name.rfind("fc3.", 0), 0u);
  EXPECT_EQ(slots[static_cast<size_t>(order.back())].name.rfind("conv1.", 0), 0u);

  GradientSync sync(comm, ex.params(), order, 0.1, 2.0);
  std::set<int> seen;
  size_t covered = 0;
  for (const auto& b : sync.buckets()) {
    size_t data = 0;
    for (int s : b.slots) {
      EXPECT_TRUE(seen.insert(s).second) << slots[static_cast<size_t>(s)].name << " in two buckets";
      const auto& sl = slots[static_cast<size_t>(s)];
      EXPECT_GE(sl.offset, b.begin_byte);
      EXPECT_LE(sl.offset + sl.count * 4, b.end_byte);
      data += sl.count * 4;
    }
    // A slice holds its slots and nothing but the zero padding between them.
    EXPECT_LT(b.bytes() - data, 256 * b.slots.size());
    covered += data;
  }
  EXPECT_EQ(seen.size(), order.size());
  EXPECT_EQ(covered, static_cast<size_t>(ex.params().parameter_count()) * 4);
  ASSERT_GE(sync.buckets().size(), 3u);
  // The first bucket closes once it reaches 0.1 MB; later ones once they reach 2 MB.
  const auto& first = sync.buckets().front();
  const size_t last_slot_bytes = slots[static_cast<size_t>(first.slots.back())].count * 4;
  EXPECT_LT(first.bytes() - last_slot_bytes, size_t{100000});
  // Buckets follow backward's order: each starts below the previous one in the flat buffer.
  for (size_t b = 1; b < sync.buckets().size(); ++b)
    EXPECT_LE(sync.buckets()[b].end_byte, sync.buckets()[b - 1].begin_byte);
  // The layout text names every parameter and bucket (what ranks compare).
  const std::string layout = sync.layout();
  for (const auto& s : slots) EXPECT_NE(layout.find("param " + s.name + " "), std::string::npos);
  EXPECT_NE(layout.find("bucket " + std::to_string(sync.buckets().size() - 1) + " "),
            std::string::npos);
}

// The branchy test model on the reference backend, batch 2, with fixed inputs.
struct FedModel {
  test::SmallModel m = test::branchy_model();
  std::unique_ptr<Backend> backend = make_backend("reference");
  Executor ex{m.graph, *backend, [] {
                CompileOptions co;
                co.batch = 2;
                return co;
              }()};
  FedModel() {
    for (size_t i = 0; i < static_cast<size_t>(ex.input("x").numel()); ++i)
      ex.input("x").as<float>()[i] = 0.01f * static_cast<float>(i % 37);
    for (size_t i = 0; i < static_cast<size_t>(ex.input("y").numel()); ++i)
      ex.input("y").as<float>()[i] = 0.5f;
  }
};

TEST(GradientSync, BackwardStartsEachBucketOnceInOrderAndFinishAverages) {
  FedModel fed;
  Executor& ex = fed.ex;

  // The gradients of one step without synchronisation.
  ex.forward();
  ex.backward();
  const size_t grad_bytes = ex.params().trainable_bytes();
  std::vector<char> plain(grad_bytes);
  std::memcpy(plain.data(), ex.params().grads(), grad_bytes);

  // The same step with a fake 2-rank communicator: each bucket starts exactly once, in bucket
  // order, while backward runs (the hook), and the result is the gradient scaled by 1/2 (the
  // fake's other rank contributes zero).
  test::FakeCommunicator comm(0, 2);
  GradientSync sync(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3);
  ex.set_gradient_ready([&](int s) { sync.gradient_ready(s); });
  ex.forward();
  ex.backward();
  EXPECT_EQ(comm.started.size(), sync.buckets().size()) << "every bucket started during backward";
  sync.finish();
  ASSERT_EQ(comm.started.size(), sync.buckets().size()) << "finish() starts nothing twice";
  for (size_t b = 0; b < comm.started.size(); ++b)
    EXPECT_NE(comm.started[b].find("gradient bucket " + std::to_string(b + 1) + "/"),
              std::string::npos)
        << comm.started[b];
  const auto* synced = static_cast<const float*>(ex.params().grads());
  const auto* before = reinterpret_cast<const float*>(plain.data());
  for (const auto& s : ex.params().slots()) {
    if (!s.spec.trainable) continue;
    for (size_t i = 0; i < s.count; ++i)
      ASSERT_FLOAT_EQ(synced[s.offset / 4 + i], 0.5f * before[s.offset / 4 + i])
          << s.name << "[" << i << "]";
  }

  // Next step: the buckets start again.
  ex.forward();
  ex.backward();
  sync.finish();
  EXPECT_EQ(comm.started.size(), 2 * sync.buckets().size());
}

// The gradient lag starts every bucket at once after backward, to travel while the next step
// computes: behind every rank's arrival, so no bucket's collective waits for a slower rank on a
// core the compute threads need (synchronous buckets, started during backward, do not).
TEST(GradientSync, TheLaggedExchangeStartsBehindEveryRanksArrival) {
  FedModel fed;
  Executor& ex = fed.ex;
  test::FakeCommunicator comm(0, 2);
  GradientSync sync(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3);
  ex.forward();
  ex.backward();
  std::vector<char> lagged(ex.params().trainable_bytes() + ParamStore::kSidebandBytes);
  std::memcpy(lagged.data(), ex.params().grads(), lagged.size());
  sync.start_all(lagged.data());
  ASSERT_EQ(comm.started.size(), sync.buckets().size() + 1);
  EXPECT_EQ(comm.started[0].rfind("arrival: ", 0), 0u) << comm.started[0];
  for (size_t b = 1; b < comm.started.size(); ++b)
    EXPECT_NE(comm.started[b].find("gradient bucket"), std::string::npos) << comm.started[b];
  sync.finish();
  EXPECT_EQ(comm.started.size(), sync.buckets().size() + 1) << "finish() starts nothing twice";
}

// One synchronised step of the branchy model on `backend` against a fake 2-rank communicator:
// the averaged gradients (read through the backend's memory) and, through `saw`, where each
// collective's values lived. `lagged`: the gradient lag's path (a copy of the gradients in the
// backend's memory, every bucket started at once) instead of backward's hook.
// `setup` runs on the GradientSync before the step (reduce_on_device).
std::vector<char> synchronised_gradients(
    Backend& backend, GradientCompression compress, bool lagged,
    const std::function<void(const void*)>& saw,
    const std::function<void(GradientSync&, test::FakeCommunicator&)>& setup = {}) {
  test::SmallModel m = test::branchy_model();
  CompileOptions co;
  co.batch = 2;
  Executor ex(m.graph, backend, co);
  MemoryResource& memory = backend.memory();
  test::write_host(memory, ex.input("x"), [](const TensorView& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = 0.01f * static_cast<float>(i % 37);
  });
  test::write_host(memory, ex.input("y"), [](const TensorView& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = 0.5f;
  });
  test::FakeCommunicator comm(0, 2);
  comm.saw_buffer = saw;
  GradientSync sync(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3, compress);
  if (setup) setup(sync, comm);
  const size_t bytes = ex.params().trainable_bytes() + ParamStore::kSidebandBytes;
  Buffer copy(bytes, 256, memory);
  if (!lagged) ex.set_gradient_ready([&](int s) { sync.gradient_ready(s); });
  ex.forward();
  ex.backward();
  void* gradients = ex.params().grads();
  if (lagged) {
    memory.copy(copy.data(), gradients, bytes);
    gradients = copy.data();
    sync.start_all(gradients);
  }
  sync.finish();
  const HostStaging host(memory, static_cast<const void*>(gradients), bytes);
  return {host.as<char>(), host.as<char>() + bytes};
}

// `check(compress, lagged, want)` for each way a step's buckets travel: without and with bf16
// compression, from backward's hook and from the lag's copy; `want` is the host backend's result.
void for_each_exchange(
    const std::function<void(GradientCompression, bool, const std::vector<char>&)>& check) {
  for (const GradientCompression compress : {GradientCompression::none, GradientCompression::bf16})
    for (const bool lagged : {false, true}) {
      SCOPED_TRACE(std::string(gradient_compression_name(compress)) + (lagged ? " lagged" : ""));
      auto host_backend = make_backend("reference");
      check(compress, lagged,
            synchronised_gradients(*host_backend, compress, lagged, [](const void*) {}));
    }
}

// On a device backend the communicator is handed host memory: each bucket, or its 16-bit codes,
// is copied off the device when it starts and back when it finishes, and the average is the host
// run's bit for bit, with and without compression, from backward's hook and from the lag's copy.
TEST(GradientSync, OnADeviceBackendEveryCollectiveRunsOnAHostCopy) {
  for_each_exchange([](GradientCompression compress, bool lagged, const std::vector<char>& want) {
    test::CountingBackend device(/*pretend_device=*/true);
    int collectives = 0;
    const std::vector<char> got =
        synchronised_gradients(device, compress, lagged, [&](const void* values) {
          ++collectives;
          EXPECT_FALSE(device.memory().owns(values)) << "a collective on device memory";
        });
    EXPECT_GT(collectives, 2);
    EXPECT_GE(device.memory().copies_to_host, collectives);
    EXPECT_GE(device.memory().copies_to_device, collectives);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
  });
}

// With the backend's own collectives (NCCL on the cuda backend) the buckets are reduced where
// they are: no host copy, the MPI communicator is asked nothing, and the result is the host
// run's bit for bit.
TEST(GradientSync, DeviceCollectivesReduceTheBucketsInPlace) {
  for_each_exchange([](GradientCompression compress, bool lagged, const std::vector<char>& want) {
    test::CountingBackend device(/*pretend_device=*/true);
    test::DeviceCalls calls;
    size_t buckets = 0;
    std::string reduction;
    const std::vector<char> got = synchronised_gradients(
        device, compress, lagged,
        [](const void*) { ADD_FAILURE() << "a bucket went to the MPI communicator"; },
        [&](GradientSync& sync, test::FakeCommunicator&) {
          EXPECT_EQ(sync.reduction(), "through host copies");
          sync.reduce_on_device(std::make_unique<test::FakeDeviceCollectives>(device, calls), 42.0);
          buckets = sync.buckets().size();
          reduction = sync.reduction();
        });
    EXPECT_EQ(reduction, "on the device (fake-nccl)");
    EXPECT_EQ(calls.allreduces, static_cast<int>(buckets));
    EXPECT_GE(calls.waits, 1);
    EXPECT_EQ(calls.stream_waits, 0);
    for (size_t i = 0; i < calls.whats.size(); ++i) {
      EXPECT_EQ(calls.timeouts[i], 42.0);
      EXPECT_NE(calls.whats[i].find("on fake-nccl"), std::string::npos) << calls.whats[i];
    }
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
  });
}

TEST(Fp16, ConvertsAsIeeeHalfRoundingToNearestEven) {
  EXPECT_EQ(float_to_fp16(1.f), 0x3c00);
  EXPECT_EQ(float_to_fp16(-2.f), 0xc000);
  EXPECT_EQ(float_to_fp16(kFp16Max), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.f), 0x7c00);           // rounds up to infinity
  EXPECT_EQ(float_to_fp16(1e-8f), 0x0000);             // below half the smallest subnormal
  EXPECT_EQ(float_to_fp16(1.f + 1.f / 2048), 0x3c00);  // a tie: to even (down)
  EXPECT_EQ(float_to_fp16(1.f + 3.f / 2048), 0x3c02);  // a tie: to even (up)
  EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.f, -24));
}

// fp16 compression on a fake 2-rank job (the other rank contributes nothing): the gradient comes
// back as fp16(g / 2), and a gradient beyond fp16's range is refused, naming the bucket.
TEST(GradientSync, Fp16CompressionRoundsTheAverageAndRefusesOverflow) {
  FedModel fed;
  Executor& ex = fed.ex;
  ex.forward();
  ex.backward();
  const size_t n = ex.params().trainable_bytes() / sizeof(float);
  auto* grads = static_cast<float*>(ex.params().grads());
  const std::vector<float> plain(grads, grads + n);

  test::FakeCommunicator comm(0, 2);
  GradientSync sync(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3,
                    GradientCompression::fp16);
  sync.finish();  // starts every bucket, then widens
  ASSERT_FALSE(comm.started.empty());
  EXPECT_NE(comm.started[0].find("fp16"), std::string::npos) << comm.started[0];
  size_t rounded = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(grads[i], fp16_to_float(float_to_fp16(0.5f * plain[i]))) << i;
    rounded += grads[i] != 0.5f * plain[i];
  }
  EXPECT_GT(rounded, 0u) << "nothing was narrowed";

  grads[0] = 1e6f;  // 5e5 after 1/ranks: beyond 65504
  try {
    sync.finish();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("gradient bucket"), std::string::npos) << what;
    EXPECT_NE(what.find("bf16"), std::string::npos) << what;
  }
}

// Dynamic loss scaling on a fake 2-rank job: the gradients arrive multiplied by S. float32 and
// bf16 divide by S in the 1/ranks multiply (a power of two: the unscaled run's bits); fp16 sums
// the scaled values, divides after widening, and lets a value beyond its range through as an
// infinity (the overflow the scaler skips) instead of refusing it.
TEST(GradientSync, LossScaledGradientsLeaveUnscaled) {
  const double s = 1024;
  for (const auto compress :
       {GradientCompression::none, GradientCompression::bf16, GradientCompression::fp16}) {
    SCOPED_TRACE(gradient_compression_name(compress));
    FedModel fed;
    Executor& ex = fed.ex;
    ex.forward();
    ex.backward();
    const size_t n = ex.params().trainable_bytes() / sizeof(float);
    auto* grads = static_cast<float*>(ex.params().grads());
    const std::vector<float> plain(grads, grads + n);
    test::FakeCommunicator comm(0, 2);
    GradientSync unscaled(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3, compress);
    unscaled.finish();
    const std::vector<float> expected(grads, grads + n);

    ex.set_loss_scale(s);
    ex.forward();
    ex.backward();
    ex.set_loss_scale(1);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(grads[i], static_cast<float>(s * plain[i])) << i;
    GradientSync sync(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3, compress);
    sync.set_loss_scale(s);
    sync.finish();
    for (size_t i = 0; i < n; ++i) {
      const float scaled_half = 0.5f * static_cast<float>(s * plain[i]);
      if (compress == GradientCompression::fp16)  // rounded where S put it
        ASSERT_EQ(grads[i], static_cast<float>(fp16_to_float(float_to_fp16(scaled_half)) / s)) << i;
      else
        ASSERT_EQ(grads[i], expected[i]) << i;
    }
    grads[0] = 1e9f;  // beyond fp16 after 1/ranks even unscaled
    EXPECT_NO_THROW(sync.finish());
    if (compress == GradientCompression::fp16) {
      EXPECT_TRUE(std::isinf(grads[0]));
    }
  }
}

// Rank 1 arrives 80 ms late in step 0: rank 0 waits 81 ms (80 of them for rank 1), rank 1 waits
// 1 ms for the network. In step 1 they arrive together and both wait 2 ms.
TEST(OverlapFigures, SeparateWaitingForSlowerRanksFromCommunication) {
  const OverlapFigures f =
      overlap_figures({{0.081, 0.002}, {0.001, 0.002}}, {{0.090, 0.010}, {0.010, 0.012}});
  EXPECT_DOUBLE_EQ(f.exposed_s, (0.081 + 0.002) / 2);    // rank 0's: the largest
  EXPECT_DOUBLE_EQ(f.allreduce_s, (0.090 + 0.010) / 2);  // rank 0's: the largest
  EXPECT_DOUBLE_EQ(f.exposed_communication_s, (0.001 + 0.002) / 2);
  EXPECT_DOUBLE_EQ(f.communication_s, (0.010 + 0.010) / 2);
  EXPECT_DOUBLE_EQ(f.imbalance_s, f.exposed_s - f.exposed_communication_s);
  EXPECT_NEAR(f.hidden_fraction(), 1 - 0.0415 / 0.05, 1e-12);
  EXPECT_NEAR(f.hidden_fraction_excluding_imbalance(), 1 - 0.0015 / 0.010, 1e-12);
  // Nothing communicated: everything hidden; ragged input is a usage error.
  EXPECT_EQ(overlap_figures({{0.0}}, {{0.0}}).hidden_fraction_excluding_imbalance(), 1.0);
  EXPECT_THROW(overlap_figures({{0.1, 0.2}, {0.1}}, {{0.1, 0.2}, {0.1}}), Error);
}

TEST(GradientSync, OneRankDoesNoCommunication) {
  test::SmallModel m = test::branchy_model();
  auto backend = make_backend("reference");
  Executor ex(m.graph, *backend, CompileOptions{});
  test::FakeCommunicator comm(0, 1);
  GradientSync sync(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3);
  ex.set_gradient_ready([&](int s) { sync.gradient_ready(s); });
  ex.forward();
  ex.backward();
  sync.finish();
  EXPECT_TRUE(comm.started.empty());
  sync.verify_same_layout_everywhere();  // trivially true, and no collective
}

// The oracle mode (crest.precision: float64) on several ranks: the buckets travel as float64, so
// the average keeps float64's bits (the fake's other rank adds zero: exactly half), and the 16-bit
// compressions, which narrow float32, are refused.
TEST(GradientSync, Float64GradientsAverageInFloat64) {
  CosmoFlowModel m = small_cosmoflow();
  auto backend = make_backend("reference");
  CompileOptions o;
  o.dtype = DType::f64;
  Executor ex(m.graph, *backend, o);
  ex.forward();
  ex.backward();
  const size_t bytes = ex.params().trainable_bytes();
  std::vector<char> plain(bytes);
  std::memcpy(plain.data(), ex.params().grads(), bytes);
  test::FakeCommunicator comm(0, 2);
  GradientSync sync(comm, ex.params(), ex.gradient_ready_order(), 1e-4, 1e-3);
  sync.finish();  // starts every bucket backward did not
  const auto* synced = static_cast<const double*>(ex.params().grads());
  const auto* before = reinterpret_cast<const double*>(plain.data());
  for (const auto& s : ex.params().slots()) {
    if (!s.spec.trainable) continue;
    for (size_t i = 0; i < s.count; ++i)
      ASSERT_EQ(synced[s.offset / 8 + i], 0.5 * before[s.offset / 8 + i]) << s.name;
  }
  try {
    GradientSync bf16(comm, ex.params(), ex.gradient_ready_order(), 1, 25,
                      GradientCompression::bf16);
    FAIL() << "bf16 compression of float64 gradients was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("crest.precision: float64 needs dist.compress: none"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace crest
