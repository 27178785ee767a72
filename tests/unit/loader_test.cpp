// DataLoader and sharding: every sample exactly once per epoch across ranks, equal batches per
// rank, order determined by (seed, epoch), batches in order whatever order threads finish in,
// the payload cache, and both bad-sample policies. A fake source makes every property visible:
// sample i decodes to x = i everywhere and y = i.
#include "crest/data/loader.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "crest/core/bf16.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"
#include "crest/dist/communicator.hpp"
#include "support/counting_backend.hpp"
#include "support/fake_communicator.hpp"
#include "train/batch_ahead.hpp"

namespace crest {
namespace {

using FakeComm = test::FakeCommunicator;

class FakeSource final : public SampleSource {
 public:
  // fraction: x[k] = i + fraction * (k + 1) instead of i (values a 16-bit type must round).
  FakeSource(int64_t n, std::set<int64_t> bad = {}, bool jitter = false, float fraction = 0)
      : n_(n), bad_(std::move(bad)), jitter_(jitter), fraction_(fraction) {
    spec_.x_shape = Shape{2, 3, 1};
    spec_.y_shape = Shape{1};
    for (int64_t i = 0; i < n; ++i)
      paths_.push_back("fake/sample-" + std::to_string(i) + ".tfrecord");
  }
  std::string format() const override { return "fake"; }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return n_; }
  const std::string& path(int64_t i) const override { return paths_[static_cast<size_t>(i)]; }
  void read(int64_t i, std::vector<std::byte>& payload) const override {
    reads_.fetch_add(1);
    if (jitter_) std::this_thread::sleep_for(std::chrono::microseconds((i * 37) % 300));
    if (bad_.count(i)) throw_input(path(i) + ": record 0: data CRC mismatch");
    payload.resize(sizeof(int64_t));
    std::memcpy(payload.data(), &i, sizeof i);
  }
  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    int64_t id = -1;
    std::memcpy(&id, payload.data(), sizeof id);
    EXPECT_EQ(id, i);
    for (int64_t k = 0; k < spec_.x_shape.numel(); ++k)
      x[k] = static_cast<float>(id) + fraction_ * static_cast<float>(k + 1);
    *static_cast<float*>(y) = static_cast<float>(id);
  }
  int64_t reads() const { return reads_.load(); }

 private:
  int64_t n_;
  std::set<int64_t> bad_;
  bool jitter_;
  float fraction_;
  SampleSpec spec_;
  std::vector<std::string> paths_;
  mutable std::atomic<int64_t> reads_{0};
};

LoaderOptions options(int64_t batch, int threads = 3, int prefetch = 2) {
  LoaderOptions o;
  o.batch_size = batch;
  o.seed = 42;
  o.threads = threads;
  o.prefetch = prefetch;
  return o;
}

// Consumes one epoch and returns the sample ids in the order the batches delivered them,
// checking each batch's x against its y.
std::vector<int64_t> consume_epoch(DataLoader& dl, int epoch) {
  dl.start_epoch(epoch);
  std::vector<int64_t> seen;
  for (int64_t b = 0; b < dl.plan().batches; ++b) {
    LoadedBatch batch = dl.next();
    EXPECT_EQ(batch.index, b);
    const int64_t per = batch.sample.numel() / dl.plan().batch_size;
    for (int64_t s = 0; s < dl.plan().batch_size; ++s) {
      const float id = batch.target.as<float>()[s];
      for (int64_t k = 0; k < per; ++k) EXPECT_EQ(batch.sample.as<float>()[s * per + k], id);
      seen.push_back(static_cast<int64_t>(id));
    }
    dl.release(batch);
  }
  return seen;
}

TEST(Sharding, PlanDropsTheRemainderEquallyAndSaysSo) {
  const ShardPlan p = plan_shards(103, 4, 1, 4);
  EXPECT_EQ(p.per_rank, 25);
  EXPECT_EQ(p.batches, 6);
  EXPECT_EQ(p.dropped_per_epoch(), 103 - 4 * 24);
  EXPECT_NE(p.describe().find("dropped"), std::string::npos);
  EXPECT_THROW(plan_shards(7, 4, 0, 2), Error);  // 3 samples per rank < one batch
}

TEST(Loader, EverySampleOnceAcrossRanksWithEqualBatches) {
  auto src = std::make_shared<FakeSource>(101, std::set<int64_t>{}, true);
  const int size = 4;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> all;
    int64_t batches = -1;
    for (int r = 0; r < size; ++r) {
      FakeComm comm(r, size);
      DataLoader dl(src, options(3), comm);
      if (batches < 0) batches = dl.plan().batches;
      EXPECT_EQ(dl.plan().batches, batches) << "rank " << r;
      const auto seen = consume_epoch(dl, epoch);
      EXPECT_EQ(static_cast<int64_t>(seen.size()), batches * 3);
      all.insert(all.end(), seen.begin(), seen.end());
    }
    std::set<int64_t> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), all.size()) << "a sample was read twice in epoch " << epoch;
    EXPECT_EQ(static_cast<int64_t>(all.size()),
              101 - plan_shards(101, 3, 0, size).dropped_per_epoch());
    for (int64_t id : all) EXPECT_TRUE(id >= 0 && id < 101);
  }
}

TEST(Loader, OrderDependsOnSeedAndEpochOnly) {
  auto src = std::make_shared<FakeSource>(40, std::set<int64_t>{}, true);
  FakeComm comm(0, 1);
  DataLoader a(src, options(4, 4), comm), b(src, options(4, 1), comm);
  const auto a0 = consume_epoch(a, 0), a1 = consume_epoch(a, 1);
  EXPECT_EQ(consume_epoch(b, 0), a0);  // same seed: same order, whatever the thread count
  EXPECT_NE(a0, a1);                   // reshuffled each epoch
  EXPECT_EQ(std::set<int64_t>(a0.begin(), a0.end()).size(), 40u);
  LoaderOptions sorted = options(4);
  sorted.shuffle = false;
  DataLoader c(src, sorted, comm);
  const auto c0 = consume_epoch(c, 3);
  EXPECT_TRUE(std::is_sorted(c0.begin(), c0.end()));
}

TEST(Loader, CacheServesLaterEpochsWithinItsBound) {
  auto src = std::make_shared<FakeSource>(24);
  FakeComm comm(0, 1);
  LoaderOptions o = options(4);
  o.cache_bytes = 24 * 8;  // every payload fits
  DataLoader dl(src, o, comm);
  consume_epoch(dl, 0);
  EXPECT_EQ(src->reads(), 24);
  consume_epoch(dl, 1);
  EXPECT_EQ(src->reads(), 24);  // nothing read again
  EXPECT_EQ(dl.stats().cache_hits, 24);
  EXPECT_EQ(dl.stats().payload_bytes, 0);

  auto src2 = std::make_shared<FakeSource>(24);
  o.cache_bytes = 10 * 8;
  DataLoader small(src2, o, comm);
  consume_epoch(small, 0);
  consume_epoch(small, 1);
  EXPECT_LE(small.cached_bytes(), 10 * 8);
  EXPECT_EQ(small.stats().cache_hits, 10);
  EXPECT_EQ(src2->reads(), 24 + 14);
}

TEST(Loader, FailModeStopsAtTheBadSampleNamingItsFile) {
  auto src = std::make_shared<FakeSource>(16, std::set<int64_t>{9});
  FakeComm comm(0, 1);
  LoaderOptions o = options(2);
  o.shuffle = false;
  DataLoader dl(src, o, comm);
  dl.start_epoch(0);
  for (int b = 0; b < 4; ++b) dl.release(dl.next());  // samples 0..7 are fine
  try {
    dl.next();
    FAIL() << "the batch with sample 9 must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("sample-9.tfrecord"), std::string::npos) << e.what();
  }
  // The loader recovers for a new epoch (still failing at the same file).
  dl.start_epoch(1);
  EXPECT_NO_THROW(dl.release(dl.next()));
}

TEST(Loader, SkipModeDropsCountsAndCompletesFromSpares) {
  // 18 samples, batch 4: 4 batches use 16, 2 spares per epoch.
  auto src = std::make_shared<FakeSource>(18, std::set<int64_t>{3, 11});
  FakeComm comm(0, 1);
  LoaderOptions o = options(4);
  o.shuffle = false;
  o.skip_bad_samples = true;
  DataLoader dl(src, o, comm);
  const auto seen = consume_epoch(dl, 0);
  EXPECT_EQ(dl.stats().skipped, 2);
  EXPECT_EQ(seen.size(), 16u);
  std::set<int64_t> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), 16u);
  EXPECT_FALSE(unique.count(3) || unique.count(11));
  EXPECT_TRUE(unique.count(16) && unique.count(17));  // the spares filled the holes

  auto src3 = std::make_shared<FakeSource>(18, std::set<int64_t>{1, 2, 5});
  DataLoader dl3(src3, o, comm);
  dl3.start_epoch(0);
  EXPECT_THROW(
      {
        for (int b = 0; b < 4; ++b) dl3.release(dl3.next());
      },
      Error);
}

// Many threads, tiny batches, jittered reads, several epochs: for the TSan preset.
TEST(Loader, ManyThreadsManyEpochsStayConsistent) {
  auto src = std::make_shared<FakeSource>(64, std::set<int64_t>{}, true);
  FakeComm comm(0, 1);
  LoaderOptions o = options(1, 8, 5);
  o.cache_bytes = 32 * 8;
  DataLoader dl(src, o, comm);
  for (int e = 0; e < 4; ++e) {
    const auto seen = consume_epoch(dl, e);
    EXPECT_EQ(seen, dl.epoch_samples());
  }
  // Abandoning an epoch halfway and starting another is allowed.
  dl.start_epoch(9);
  dl.release(dl.next());
  dl.start_epoch(10);
  EXPECT_EQ(consume_epoch(dl, 11).size(), 64u);
}

}  // namespace
}  // namespace crest

namespace crest {
namespace {

// Every-sample plans (DeepCAM's validation): contiguous block per rank plus one of the
// remainder, nothing dropped, the last batch partial.
TEST(Sharding, EverySamplePlansDropNothingAndFollowTheReferenceSplit) {
  // 10 samples on 4 ranks: blocks of 2 at [0,2) [2,4) [4,6) [6,8), remainder 8 -> rank 0,
  // 9 -> rank 1.
  std::vector<int64_t> order(10);
  for (int64_t i = 0; i < 10; ++i) order[static_cast<size_t>(i)] = 100 + i;
  const std::vector<std::vector<int64_t>> want{
      {100, 101, 108}, {102, 103, 109}, {104, 105}, {106, 107}};
  for (int r = 0; r < 4; ++r) {
    const ShardPlan p = plan_shards(10, 2, r, 4, /*every_sample=*/true);
    EXPECT_EQ(rank_samples(p, order), want[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_EQ(p.per_rank, r < 2 ? 3 : 2);
    EXPECT_EQ(p.batches, r < 2 ? 2 : 1);  // ranks run different batch counts
    EXPECT_EQ(p.dropped_per_epoch(), 0);
    EXPECT_EQ(p.samples_per_epoch(), 10);
  }
  EXPECT_NE(plan_shards(10, 2, 0, 4, true).describe().find("the last one partial"),
            std::string::npos);
  // Fewer samples than ranks: some ranks read nothing, which is no error.
  EXPECT_EQ(plan_shards(3, 2, 3, 4, true).batches, 0);
  EXPECT_EQ(plan_shards(3, 2, 2, 4, true).batches, 1);
}

TEST(Loader, EverySampleLoaderDeliversAPartialLastBatch) {
  auto src = std::make_shared<FakeSource>(7, std::set<int64_t>{}, true);
  FakeComm comm(0, 1);
  LoaderOptions o = options(3);
  o.shuffle = false;
  o.every_sample = true;
  DataLoader dl(src, o, comm);
  ASSERT_EQ(dl.plan().batches, 3);
  dl.start_epoch(0);
  std::vector<int64_t> seen;
  for (int b = 0; b < 3; ++b) {
    const LoadedBatch batch = dl.next();
    ASSERT_EQ(batch.present.size(), 3u);
    EXPECT_EQ(batch.samples, b < 2 ? 3 : 1);
    EXPECT_EQ(batch.complete(), b < 2);
    for (size_t s = 0; s < 3; ++s) {
      const float y = batch.target.as<float>()[s];
      if (batch.present[s]) {
        seen.push_back(static_cast<int64_t>(y));
      } else {
        // Empty places are zeros, not a previous batch's samples.
        EXPECT_EQ(y, 0.f);
        for (int k = 0; k < 6; ++k) EXPECT_EQ(batch.sample.as<float>()[s * 6 + k], 0.f);
      }
    }
    dl.release(batch);
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(dl.stats().samples, 7);
}

TEST(Loader, EverySampleSkipModeLeavesTheBadSamplesPlaceEmpty) {
  auto src = std::make_shared<FakeSource>(6, std::set<int64_t>{1});
  FakeComm comm(0, 1);
  LoaderOptions o = options(3);
  o.shuffle = false;
  o.every_sample = true;
  o.skip_bad_samples = true;
  DataLoader dl(src, o, comm);
  dl.start_epoch(0);
  const LoadedBatch first = dl.next();
  EXPECT_EQ(first.samples, 2);
  EXPECT_EQ(std::vector<uint8_t>(first.present.begin(), first.present.end()),
            (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(first.target.as<float>()[2], 2.f);
  dl.release(first);
  const LoadedBatch second = dl.next();
  EXPECT_TRUE(second.complete());
  dl.release(second);
  EXPECT_EQ(dl.stats().skipped, 1);
  EXPECT_EQ(dl.stats().samples, 5);
}

// sample_dtype bf16 / f16 (a 16-bit model input): every sample is the float32 loader's, rounded
// to nearest even, in half the bytes; a skipped sample's place is still zeros.
TEST(Loader, A16BitSampleDtypeNarrowsEverySample) {
  auto src = std::make_shared<FakeSource>(6, std::set<int64_t>{1}, false, 1.0f / 3);
  FakeComm comm(0, 1);
  LoaderOptions o = options(3);
  o.shuffle = false;
  o.every_sample = true;
  o.skip_bad_samples = true;
  DataLoader wide(src, o, comm);
  for (const DType half : {DType::bf16, DType::f16}) {
    o.sample_dtype = half;
    DataLoader narrow(src, o, comm);
    wide.start_epoch(0);
    narrow.start_epoch(0);
    for (int b = 0; b < 2; ++b) {
      const LoadedBatch w = wide.next(), n = narrow.next();
      ASSERT_EQ(n.sample.dtype(), half);
      ASSERT_EQ(n.sample.bytes() * 2, w.sample.bytes());
      EXPECT_EQ(std::vector<uint8_t>(n.present.begin(), n.present.end()),
                std::vector<uint8_t>(w.present.begin(), w.present.end()));
      for (int64_t i = 0; i < w.sample.numel(); ++i) {
        const float v = w.sample.as<float>()[i];
        ASSERT_EQ(n.sample.as<uint16_t>()[i],
                  half == DType::bf16 ? float_to_bf16(v) : float_to_fp16(v))
            << dtype_name(half) << " batch " << b << " element " << i;
      }
      if (b == 0) {  // sample 1, place 1 (elements 6 to 11), was skipped
        ASSERT_EQ(n.present[1], 0);
        EXPECT_EQ(n.sample.as<uint16_t>()[6], 0) << "the skipped sample's place";
      }
      wide.release(w);
      narrow.release(n);
    }
  }
  o.sample_dtype = DType::i32;
  EXPECT_THROW(DataLoader(src, o, comm), Error);
}

// A device model's loader decodes into its backend's staging memory (page-locked on a GPU), and
// the trainer holds the next batch while the step on this one runs (read ahead, held 2): the
// ring gets a slot for it, and the two come out in the epoch's order, as one at a time would.
TEST(Loader, BatchesLiveInTheMemoryAskedAndTwoMayBeHeld) {
  auto src = std::make_shared<FakeSource>(24, std::set<int64_t>{}, true);
  FakeComm comm(0, 1);
  test::CountingMemory pinned(/*pretend_device=*/false);
  LoaderOptions o = options(4, 2, 1);
  o.batch_memory = &pinned;
  o.held = 2;
  std::vector<int64_t> one_at_a_time;
  {
    DataLoader plain(src, options(4, 2, 1), comm);
    one_at_a_time = consume_epoch(plain, 0);
  }
  DataLoader dl(src, o, comm);
  EXPECT_EQ(pinned.allocations, 6);  // three slots (two held, one decoding), x and y each
  dl.start_epoch(0);
  std::vector<int64_t> seen;
  LoadedBatch held = dl.next();
  for (int64_t b = 1; b <= dl.plan().batches; ++b) {
    std::optional<LoadedBatch> ahead;
    if (b < dl.plan().batches) ahead = dl.next();
    EXPECT_TRUE(pinned.owns(held.sample.data()) && pinned.owns(held.target.data()));
    for (int64_t s = 0; s < 4; ++s)
      seen.push_back(static_cast<int64_t>(held.target.as<float>()[s]));
    dl.release(held);
    if (ahead) held = *ahead;
  }
  EXPECT_EQ(seen, one_at_a_time);
  o.held = 0;
  EXPECT_THROW(DataLoader(src, o, comm), Error);
}

// The trainer's and predict's reading ahead (src/train/batch_ahead.hpp): the batches in the
// loader's order; a failure reading a batch ahead surfaces only when that batch's turn comes (the
// batch before it is computed first); a batch read ahead and not taken goes back to the loader.
TEST(BatchAhead, ReadsInOrderAndKeepsAFailureForItsTurn) {
  auto src = std::make_shared<FakeSource>(16, std::set<int64_t>{9});
  FakeComm comm(0, 1);
  LoaderOptions o = options(2, 2, 1);
  o.shuffle = false;
  DataLoader dl(src, o, comm);
  dl.start_epoch(0);
  BatchAhead ahead(dl, nullptr);
  for (int64_t b = 0; b < 4; ++b) {  // samples 0..7 are fine; batch 4 holds the bad sample 9
    const LoadedBatch batch = ahead.take();
    EXPECT_EQ(batch.index, b);
    EXPECT_NO_THROW(ahead.read());
    ahead.release(batch);
  }
  try {
    ahead.take();
    FAIL() << "the batch with sample 9 must fail at its turn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample-9.tfrecord"), std::string::npos) << e.what();
  }
  dl.start_epoch(1);  // nothing is held: the failed batch's slot went back
  ahead.read();
  ahead.drop();
  EXPECT_NO_THROW(dl.start_epoch(2));
  EXPECT_EQ(ahead.take().index, 0);
}

}  // namespace
}  // namespace crest
