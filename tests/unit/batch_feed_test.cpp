// BatchFeed: how the trainer moves batches into a model and predictions out of it, on host
// memory (in place), on memory that is not host memory (explicit copies), into a float64
// program (converted) and into the 16-bit input of mixed precision (narrowed).
#include "crest/train/batch_feed.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "crest/core/bf16.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/engine/session.hpp"
#include "crest/models/cosmoflow.hpp"
#include "support/counting_backend.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

BuiltModel small_model() {
  CosmoFlowModel c = build_cosmoflow(test::small_cosmoflow(32, 2));
  BuiltModel m;
  m.graph = std::move(c.graph);
  m.prediction = c.prediction;
  m.loss = c.loss;
  return m;
}

// A loader-like batch of host float32 memory: samples and targets of `ex`'s inputs.
struct HostBatch {
  std::vector<float> sample, target;
  LoadedBatch view;
  HostBatch(const Executor& ex, const BuiltModel& m) {
    const TensorView s = ex.input(m.sample_input), t = ex.input(m.target_input);
    sample.resize(static_cast<size_t>(s.numel()));
    target.resize(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < sample.size(); ++i) sample[i] = static_cast<float>(i % 7) * 0.25f;
    for (size_t i = 0; i < target.size(); ++i) target[i] = 0.5f - static_cast<float>(i) * 0.125f;
    view.sample = TensorView(sample.data(), {s.shape(), DType::f32});
    view.target = TensorView(target.data(), {t.shape(), DType::f32});
  }
};

CompileOptions batch_of_two(DType dtype = DType::f32) {
  CompileOptions co;
  co.batch = 2;
  co.dtype = dtype;
  return co;
}

TEST(BatchFeed, OnMemoryThatIsNotHostMemoryEveryBatchAndPredictionIsAnExplicitCopy) {
  const BuiltModel m = small_model();
  test::CountingBackend device(/*pretend_device=*/true);
  Executor ex(m.graph, device, batch_of_two());
  HostBatch batch(ex, m);
  BatchFeed feed(ex, m);
  const int before = device.memory().copies_to_device;
  feed.feed(batch.view);
  // Samples and targets, each on the copy queue, and done when feed returns.
  EXPECT_EQ(device.memory().copies_to_device + device.memory().copies_started - before, 2);
  EXPECT_EQ(std::memcmp(ex.input(m.sample_input).data(), batch.sample.data(),
                        batch.sample.size() * sizeof(float)),
            0);
  ex.forward(false);
  const int to_host = device.memory().copies_to_host;
  const TensorView p = feed.host_prediction();
  EXPECT_EQ(device.memory().copies_to_host - to_host, 1);
  const TensorView model_p = ex.output(m.prediction);
  EXPECT_NE(p.data(), model_p.data());
  EXPECT_EQ(std::memcmp(p.data(), model_p.data(), p.bytes()), 0);
}

// Batches a pretend device's step reads: `n` of them, each with values of its own.
std::vector<std::unique_ptr<HostBatch>> distinct_batches(const Executor& ex, const BuiltModel& m,
                                                         int n) {
  std::vector<std::unique_ptr<HostBatch>> out;
  for (int k = 0; k < n; ++k) {
    out.push_back(std::make_unique<HostBatch>(ex, m));
    for (float& v : out.back()->sample) v += 0.75f * static_cast<float>(k);
    for (float& v : out.back()->target) v -= 0.5f * static_cast<float>(k);
  }
  return out;
}

bool holds(const Executor& ex, const std::string& input, const std::vector<float>& values) {
  return std::memcmp(ex.input(input).data(), values.data(), values.size() * sizeof(float)) == 0;
}

// A small model on a pretend device, `n` batches for it and its feed.
struct PretendDeviceFeed {
  BuiltModel m = small_model();
  test::CountingBackend device{/*pretend_device=*/true};
  Executor ex{m.graph, device, batch_of_two()};
  std::vector<std::unique_ptr<HostBatch>> batches;
  BatchFeed feed{ex, m};
  explicit PretendDeviceFeed(int n) : batches(distinct_batches(ex, m, n)) {}

  const LoadedBatch& batch(int k) const { return batches[static_cast<size_t>(k)]->view; }
  bool holds_samples(const std::vector<float>& values) const {
    return holds(ex, m.sample_input, values);
  }
  // Whether the model's inputs hold batch k's samples and targets.
  bool reads(int k) const {
    const HostBatch& b = *batches[static_cast<size_t>(k)];
    return holds_samples(b.sample) && holds(ex, m.target_input, b.target);
  }
  const test::CountingMemory& memory() const { return device.memory(); }
};

// The next step's batch, staged while the model reads this one: its copies start at once, into
// a second set of inputs (the model still reads the first batch), and its feed points the model
// at them behind the copies (the pretend device's copies run only when the device's work is
// ordered after them), without another copy. The third batch goes into the first set again.
TEST(BatchFeed, AStagedBatchIsCopiedBesideTheBatchTheModelReads) {
  PretendDeviceFeed f(2);
  f.feed.feed(f.batch(1));
  const double second_loss = f.ex.forward(false);  // fed without staging
  f.feed.feed(f.batch(0));
  const double first_loss = f.ex.forward(false);
  ASSERT_NE(first_loss, second_loss);
  const int allocations = f.memory().allocations, started = f.memory().copies_started,
            copies = f.memory().copies_to_device;
  f.feed.stage(f.batch(1));
  EXPECT_EQ(f.memory().copies_started - started, 2);   // samples and targets
  EXPECT_EQ(f.memory().allocations - allocations, 2);  // the second set of inputs
  EXPECT_EQ(f.ex.forward(false), first_loss);
  EXPECT_TRUE(f.reads(0));
  f.feed.feed(f.batch(1));
  EXPECT_EQ(f.memory().copies_started - started, 2);
  EXPECT_TRUE(f.reads(1));
  EXPECT_EQ(f.ex.forward(false), second_loss);
  f.feed.done_with(f.batch(1));
  f.feed.stage(f.batch(0));
  f.feed.feed(f.batch(0));
  EXPECT_EQ(f.ex.forward(false), first_loss);
  f.feed.done_with(f.batch(0));
  EXPECT_EQ(f.memory().copies_started - started, 4);
  EXPECT_EQ(f.memory().allocations - allocations, 2);
  EXPECT_EQ(f.memory().copies_to_device, copies);
}

// The second set of inputs is what the memory check counts for a session that stages batches
// (SessionOptions::stages_batches): one set of the program's inputs, on a device only.
TEST(BatchFeed, TheSecondSetOfInputsIsWhatTheMemoryCheckCounted) {
  const BuiltModel m = small_model();
  test::CountingBackend device(/*pretend_device=*/true);
  SessionOptions so;
  so.batch = 2;
  so.stages_batches = true;
  Executor ex(m.graph, device, compile_options(so, device));
  const size_t inputs = ex.input(m.sample_input).bytes() + ex.input(m.target_input).bytes();
  EXPECT_EQ(ex.planned_memory().inputs, inputs);
  const std::vector<std::unique_ptr<HostBatch>> batches = distinct_batches(ex, m, 2);
  BatchFeed feed(ex, m);
  feed.feed(batches[0]->view);
  const size_t before = device.memory().live_bytes();
  feed.stage(batches[1]->view);
  EXPECT_EQ(device.memory().live_bytes() - before, inputs);
  test::CountingBackend host;
  EXPECT_EQ(compile_options(so, host).beside.input_sets, 0);  // host memory binds batches
  so.stages_batches = false;
  EXPECT_EQ(compile_options(so, device).beside.input_sets, 0);
}

// The trainer's order, step after step: stage the next batch, compute, give the last one back,
// feed the next. Every step's batch is read, and once both buffers have had their copies no
// copy object is made again: the given-back copies start the next ones (no allocation per step).
TEST(BatchFeed, StagingEveryStepReusesItsCopies) {
  PretendDeviceFeed f(3);
  f.feed.feed(f.batch(0));
  int made = 0;
  for (int s = 1; s <= 9; ++s) {
    const int next = s % 3, last = (s - 1) % 3;
    const int started = f.memory().copies_started;
    f.feed.stage(f.batch(next));
    EXPECT_TRUE(f.reads(last)) << "step " << s;
    f.feed.done_with(f.batch(last));
    f.feed.feed(f.batch(next));
    EXPECT_TRUE(f.reads(next)) << "step " << s;
    EXPECT_EQ(f.memory().copies_started - started, 2) << "step " << s;
    if (s == 3) made = f.memory().copy_objects_made;
  }
  EXPECT_GT(made, 0);
  EXPECT_EQ(f.memory().copy_objects_made, made);
}

// A batch that reaches the model converted (here widened into a float64 program) is staged too:
// converted on the host into the input's page-locked buffer, then copied beside the batch the
// model reads. Fed, it gives the unstaged feed's results; another batch's feed drops it.
TEST(BatchFeed, ABatchConvertedOnTheHostIsStagedToo) {
  const BuiltModel m = small_model();
  test::CountingBackend device(/*pretend_device=*/true);
  Executor ex(m.graph, device, batch_of_two(DType::f64));
  const std::vector<std::unique_ptr<HostBatch>> b = distinct_batches(ex, m, 3);
  BatchFeed feed(ex, m);
  double loss[3];
  for (int k : {1, 2, 0}) {  // unstaged: each copied and converted when fed
    feed.feed(b[static_cast<size_t>(k)]->view);
    loss[k] = ex.forward(false);
  }
  ASSERT_NE(loss[0], loss[1]);
  const int started = device.memory().copies_started, copies = device.memory().copies_to_device;
  feed.stage(b[1]->view);
  EXPECT_EQ(device.memory().copies_started - started, 2);
  EXPECT_EQ(ex.forward(false), loss[0]);  // the model still reads batch 0
  feed.done_with(b[0]->view);
  feed.feed(b[1]->view);
  EXPECT_EQ(ex.forward(false), loss[1]);
  EXPECT_EQ(device.memory().copies_to_device, copies);  // nothing copied when fed
  feed.done_with(b[1]->view);
  feed.stage(b[0]->view);
  feed.feed(b[2]->view);  // another batch: the staged one is dropped, this one copied
  EXPECT_EQ(ex.forward(false), loss[2]);
  feed.feed(b[0]->view);
  EXPECT_EQ(ex.forward(false), loss[0]);
  EXPECT_EQ(device.memory().copies_started - started, 4);  // two batches staged
}

// A staged batch is one the trainer reads ahead; another batch fed before it (or a sample's
// copies, validation's) drops it, and the model reads what was fed last.
TEST(BatchFeed, FeedingAnotherBatchDropsTheStagedOne) {
  PretendDeviceFeed f(3);
  f.feed.feed(f.batch(0));
  f.feed.stage(f.batch(1));
  f.feed.feed(f.batch(2));
  EXPECT_TRUE(f.reads(2));
  f.feed.stage(f.batch(1));
  f.feed.feed_copies_of(f.batch(0), 1);
  const std::vector<float>& x = f.batches[0]->sample;  // two places: both hold its second sample
  const auto half = static_cast<std::ptrdiff_t>(x.size() / 2);
  std::vector<float> second_sample_twice(x.begin() + half, x.end());
  second_sample_twice.insert(second_sample_twice.end(), x.begin() + half, x.end());
  EXPECT_TRUE(f.holds_samples(second_sample_twice));
  const int started = f.memory().copies_started;
  f.feed.feed(f.batch(1));
  EXPECT_EQ(f.memory().copies_started - started, 2);  // copied again
  EXPECT_TRUE(f.reads(1));
}

// A staged batch given back unfed (the run stopped after the step before it) is forgotten: the
// loader may decode another batch at the same address, and that one is copied when fed.
TEST(BatchFeed, AStagedBatchGivenBackUnfedIsForgotten) {
  PretendDeviceFeed f(2);
  f.feed.feed(f.batch(0));
  f.feed.stage(f.batch(1));
  f.feed.done_with(f.batch(1));
  for (float& v : f.batches[1]->sample) v = -v;  // another batch in the same buffer
  f.feed.feed(f.batch(1));
  EXPECT_TRUE(f.reads(1));
}

// Without staging, every batch goes into the model's own inputs: no second set is made.
TEST(BatchFeed, BatchesFedWithoutStagingShareTheModelsOwnInputs) {
  PretendDeviceFeed f(2);
  const void* own = f.ex.input(f.m.sample_input).data();
  const int allocations = f.memory().allocations;
  for (int round = 0; round < 2; ++round)
    for (int k = 0; k < 2; ++k) {
      f.feed.feed(f.batch(k));
      EXPECT_EQ(f.ex.input(f.m.sample_input).data(), own);
      EXPECT_TRUE(f.reads(k));
    }
  EXPECT_EQ(f.memory().allocations, allocations);
}

// Host memory binds the loader's batch in place when it is fed: staging does nothing.
TEST(BatchFeed, OnHostMemoryStagingLeavesTheModelAsItIs) {
  const BuiltModel m = small_model();
  test::CountingBackend host;
  Executor ex(m.graph, host, batch_of_two());
  const auto batches = distinct_batches(ex, m, 2);
  BatchFeed feed(ex, m);
  const int before = host.memory().allocations + host.memory().copies_to_device;
  feed.feed(batches[0]->view);
  feed.stage(batches[1]->view);
  EXPECT_EQ(ex.input(m.sample_input).data(), static_cast<const void*>(batches[0]->sample.data()));
  feed.feed(batches[1]->view);
  EXPECT_EQ(ex.input(m.sample_input).data(), static_cast<const void*>(batches[1]->sample.data()));
  EXPECT_EQ(host.memory().allocations + host.memory().copies_to_device, before);
}

TEST(BatchFeed, OnHostMemoryTheBatchIsReadInPlaceAndThePredictionIsNotCopied) {
  const BuiltModel m = small_model();
  test::CountingBackend host;
  Executor ex(m.graph, host, batch_of_two());
  HostBatch batch(ex, m);
  BatchFeed feed(ex, m);
  const int before = host.memory().copies_to_device;
  feed.feed(batch.view);
  EXPECT_EQ(host.memory().copies_to_device - before, 0);
  ex.forward(false);
  EXPECT_EQ(feed.host_prediction().data(), ex.output(m.prediction).data());
}

TEST(BatchFeed, AFloat32BatchIsWidenedIntoAFloat64Program) {
  const BuiltModel m = small_model();
  auto reference = make_backend("reference");
  Executor ex(m.graph, *reference, batch_of_two(DType::f64));
  HostBatch batch(ex, m);
  BatchFeed feed(ex, m);
  feed.feed(batch.view);
  const TensorView in = ex.input(m.target_input);
  ASSERT_EQ(in.dtype(), DType::f64);
  for (size_t i = 0; i < batch.target.size(); ++i)
    EXPECT_EQ(in.as<double>()[i], static_cast<double>(batch.target[i])) << i;
  ex.forward(false);
  EXPECT_EQ(feed.host_prediction().dtype(), DType::f64);
}

// CompileOptions::half_inputs: the sample input is 16-bit, the target (read by the float32 loss)
// is not. The samples are rounded to nearest even, on host memory (the backend's narrow) and on
// memory that is not (host staging), and nothing is bound in place.
TEST(BatchFeed, AFloat32BatchIsNarrowedIntoA16BitInput) {
  const BuiltModel m = small_model();
  for (const DType half : {DType::bf16, DType::f16}) {
    for (const bool device : {false, true}) {
      test::CountingBackend backend(/*pretend_device=*/device);
      CompileOptions co = batch_of_two();
      co.half = half;
      co.half_inputs = true;
      Executor ex(m.graph, backend, co);
      HostBatch batch(ex, m);
      // Values between two 16-bit neighbours, ties included (1 + 2^-8 rounds down to even in
      // bf16, 1 + 3 * 2^-8 up; truncation would take both down).
      for (size_t i = 0; i < batch.sample.size(); ++i)
        batch.sample[i] =
            1.0f + static_cast<float>(i % 5) * 0x1.0p-8f + static_cast<float>(i) * 1e-6f;
      batch.sample[0] = 1.0f + 0x1.0p-8f;
      batch.sample[1] = 1.0f + 3 * 0x1.0p-8f;
      BatchFeed feed(ex, m);
      feed.feed(batch.view);
      const std::string what = dtype_name(half) + (device ? " device" : " host");
      // On a device the narrowed batch goes through a staging buffer of the staging memory
      // (page-locked on a GPU), made for the first batch and reused for the next.
      feed.feed(batch.view);
      EXPECT_EQ(backend.memory().staging.allocations, device ? 1 : 0) << what;
      const TensorView x = ex.input(m.sample_input);
      ASSERT_EQ(x.dtype(), half) << what;
      EXPECT_EQ(ex.input(m.target_input).dtype(), DType::f32) << what;
      const HostStaging host(backend.memory(), static_cast<const void*>(x.data()), x.bytes());
      const auto* codes = static_cast<const uint16_t*>(host.data());
      for (size_t i = 0; i < batch.sample.size(); ++i) {
        const uint16_t want =
            half == DType::bf16 ? float_to_bf16(batch.sample[i]) : float_to_fp16(batch.sample[i]);
        ASSERT_EQ(codes[i], want) << what << " element " << i;
      }
      if (half == DType::bf16) {
        EXPECT_EQ(bf16_to_float(codes[0]), 1.0f) << what;
        EXPECT_EQ(bf16_to_float(codes[1]), 1.0f + 0x1.0p-6f) << what;
      }
      EXPECT_NE(static_cast<const void*>(x.data()), batch.sample.data()) << what;
    }
  }
}

// A loader asked for the 16-bit samples (loader_sample_dtype) delivers batches the model reads
// in place, as float32 ones are read by a float32 model.
TEST(BatchFeed, ALoaderBatchIn16BitsIsReadInPlace) {
  const BuiltModel m = small_model();
  test::CountingBackend host;
  CompileOptions co = batch_of_two();
  co.half = DType::bf16;
  co.half_inputs = true;
  Executor ex(m.graph, host, co);
  ASSERT_EQ(loader_sample_dtype(ex, m), DType::bf16);
  Executor plain(m.graph, host, batch_of_two());
  EXPECT_EQ(loader_sample_dtype(plain, m), DType::f32);
  HostBatch batch(ex, m);
  std::vector<uint16_t> codes(batch.sample.size());
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = float_to_bf16(batch.sample[i]);
  batch.view.sample = TensorView(codes.data(), {batch.view.sample.shape(), DType::bf16});
  BatchFeed feed(ex, m);
  feed.feed(batch.view);
  EXPECT_EQ(ex.input(m.sample_input).data(), static_cast<void*>(codes.data()));
}

TEST(BatchFeed, ABatchOfTheWrongSizeNamesTheInput) {
  const BuiltModel m = small_model();
  auto reference = make_backend("reference");
  Executor ex(m.graph, *reference, batch_of_two());
  HostBatch batch(ex, m);
  batch.view.target = TensorView(batch.target.data(), {Shape{1}, DType::f32});
  BatchFeed feed(ex, m);
  try {
    feed.feed(batch.view);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'y'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crest
