// The oneDNN layout tuner (crest.autotune): the fastest candidate is kept, a cached or recorded
// choice is used without timing, a damaged cache is warned about once and ignored, the cache is
// keyed by machine (threads) and problem, and tuned kernels compute what the reference does.
// Timings are fake (an injected timer), so nothing here depends on the machine's speed.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend_test_util.hpp"
#include "onednn/context.hpp"
#include "onednn/conv.hpp"
#include "onednn/layout_tuner.hpp"
#include "support/scoped_env.hpp"
#include "support/test_util.hpp"
#include "train/run_layouts.hpp"

namespace crest {
namespace {

using onednn::LayoutTimer;
using onednn::LayoutTuner;
using testing::expect_close;
using testing::FormattedBuffer;
using testing::random_floats;

// Fake timings by candidate name (every pass of a candidate costs its figure; names not listed
// cost 1 s). Each measured call still runs once, so the timing path itself is exercised.
class FakeTimer final : public LayoutTimer {
 public:
  FakeTimer(std::map<std::string, double> costs, int* measurements)
      : costs_(std::move(costs)), measurements_(measurements) {}
  double seconds(const std::string& candidate, const std::string& /*pass*/,
                 const std::function<void()>& call) override {
    ++*measurements_;
    call();
    const auto it = costs_.find(candidate);
    return it == costs_.end() ? 1.0 : it->second;
  }

 private:
  std::map<std::string, double> costs_;
  int* measurements_;
};

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("crest_layout_tuner_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// 16 channels, a bias and its gradient: Winograd serves it too, so the tests of layout
// bookkeeping turn Winograd off (CREST_WINOGRAD=0), or the tuner would time it as well.
ConvDesc small_conv(int64_t size = 6, bool transposed = false) {
  ConvDesc d;
  d.spatial_rank = 2;
  d.n = 2;
  d.in_channels = 16;
  d.out_channels = 16;
  d.transposed = transposed;
  for (size_t i = 0; i < 2; ++i) {
    d.in_size[i] = size;
    d.kernel[i] = 3;
    d.pad_lo[i] = d.pad_hi[i] = 1;
    d.out_size[i] = size;  // stride 1, pad 1, kernel 3: same size either way
  }
  return d;
}

Shape src_shape(const ConvDesc& d) {
  return Shape({d.n, d.in_channels, d.in_size[0], d.in_size[1]});
}
Shape dst_shape(const ConvDesc& d) {
  return Shape({d.n, d.out_channels, d.out_size[0], d.out_size[1]});
}

struct Tuned {
  std::unique_ptr<ConvKernel> kernel;
  int measurements = 0;
  std::vector<std::string> notes;
};

// A conv kernel made under a tuner with these fake costs and options.
Tuned make_tuned(const ConvDesc& d, LayoutTuning options, std::map<std::string, double> costs,
                 Layout hint = Layout::plain) {
  Tuned t;
  auto ctx = std::make_shared<onednn::Context>();
  LayoutTuner tuner(std::move(options),
                    std::make_unique<FakeTimer>(std::move(costs), &t.measurements),
                    [&t](const std::string& line) { t.notes.push_back(line); });
  t.kernel = onednn::make_conv(ctx, d, plain_format(src_shape(d), DType::f32, hint), &tuner);
  return t;
}

LayoutTuning measuring(const std::string& cache) {
  LayoutTuning o;
  o.measure = true;
  o.cache_file = cache;
  return o;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

// All three passes of `k` against the reference backend's kernel.
void expect_agrees_with_reference(const ConvDesc& d, ConvKernel& k) {
  auto ref = make_backend("reference");
  auto dnn = make_backend("onednn");
  auto rk = ref->conv(d, plain_format(src_shape(d), DType::f32));
  const auto wcount = static_cast<size_t>(d.in_channels * d.out_channels * 9);
  const auto x = random_floats(static_cast<size_t>(src_shape(d).numel()), 1);
  const auto w = random_floats(wcount, 2);
  const auto b = random_floats(static_cast<size_t>(d.out_channels), 3);
  const auto dy = random_floats(static_cast<size_t>(dst_shape(d).numel()), 4);
  Buffer scratch(std::max<size_t>(k.scratch_bytes(), 64));

  std::vector<float> y_ref(static_cast<size_t>(dst_shape(d).numel()));
  rk->forward(x.data(), w.data(), b.data(), y_ref.data(), nullptr);
  FormattedBuffer xs(*dnn, k.src_format(), x), ys(*dnn, k.dst_format());
  k.forward(xs.data(), w.data(), b.data(), ys.data(), scratch.data());
  expect_close(ys.get(), y_ref, 1e-5, "forward");

  std::vector<float> dx_ref(static_cast<size_t>(src_shape(d).numel()));
  rk->backward_data(dy.data(), w.data(), dx_ref.data(), nullptr);
  FormattedBuffer dys(*dnn, k.dst_format(), dy), dxs(*dnn, k.src_format());
  k.backward_data(dys.data(), w.data(), dxs.data(), scratch.data());
  expect_close(dxs.get(), dx_ref, 1e-5, "backward data");

  std::vector<float> dw_ref(wcount), db_ref(static_cast<size_t>(d.out_channels));
  rk->backward_weights(x.data(), dy.data(), dw_ref.data(), db_ref.data(), nullptr);
  std::vector<float> dw(wcount, 1e30f), db(static_cast<size_t>(d.out_channels), 1e30f);
  k.backward_weights(xs.data(), dys.data(), dw.data(), db.data(), scratch.data());
  expect_close(dw, dw_ref, 1e-4, "backward weights");
  expect_close(db, db_ref, 1e-4, "backward bias");
}

TEST(OneDnnLayoutTuner, KeepsTheFastestCandidate) {
  TempDir dir;
  const test::ScopedEnv no_winograd("CREST_WINOGRAD", "0");  // layouts only
  const ConvDesc d = small_conv();
  // Untuned, oneDNN's choice for 16 channels on a plain input is a blocked layout.
  auto untuned = make_backend("onednn")->conv(d, plain_format(src_shape(d), DType::f32));
  ASSERT_NE(untuned->src_format().layout, Layout::channels_last);

  Tuned cl = make_tuned(d, measuring(dir.file("a.json")), {{"channels_last", 1e-3}});
  EXPECT_EQ(cl.kernel->src_format().layout, Layout::channels_last);
  EXPECT_EQ(cl.kernel->dst_format().layout, Layout::channels_last);
  EXPECT_GT(cl.measurements, 0);
  ASSERT_EQ(cl.notes.size(), 1u);  // the measurement's line
  EXPECT_NE(cl.notes[0].find("-> channels_last"), std::string::npos) << cl.notes[0];

  // oneDNN's `any` is the blocked layout here, so "blocked" is its duplicate (timed once, under
  // the first name).
  Tuned blocked = make_tuned(d, measuring(dir.file("b.json")), {{"any", 1e-3}, {"blocked", 1e-3}});
  EXPECT_EQ(blocked.kernel->src_format().layout, Layout::blocked);
  EXPECT_TRUE(test::names_blocked_channels(blocked.kernel->src_format().str()))
      << blocked.kernel->src_format().str();
}

TEST(OneDnnLayoutTuner, TimesEveryPassOfATrainingKernelAndOnlyForwardForInference) {
  TempDir dir;
  const test::ScopedEnv no_winograd("CREST_WINOGRAD", "0");  // layouts only
  ConvDesc d = small_conv();
  d.out_channels = 24;
  // Channels-last on a channels-last producer: one candidate set, no reorder to time.
  Tuned train = make_tuned(d, measuring(dir.file("t.json")), {}, Layout::channels_last);
  d.training = false;
  Tuned infer = make_tuned(d, measuring(dir.file("i.json")), {}, Layout::channels_last);
  ASSERT_GT(infer.measurements, 0);
  // Training times forward, backward weights and backward data per candidate (reorders only
  // where src differs from the hint), inference forward (and the src reorder) only.
  EXPECT_GT(train.measurements, 2 * infer.measurements);
}

// A convolution Winograd serves (3x3, stride 1, no bias gradient) runs by whichever of Winograd
// and the direct kernel measured faster; the choice is cached like a layout.
TEST(OneDnnLayoutTuner, ChoosesBetweenWinogradAndTheDirectKernelByMeasuring) {
  TempDir dir;
  ConvDesc d = small_conv();
  d.bias_grad = false;
  auto is_winograd = [](const Tuned& t) {
    return t.kernel->implementation().find("Winograd") != std::string::npos;
  };
  Tuned fast_winograd = make_tuned(d, measuring(dir.file("w.json")), {{"winograd", 1e-3}});
  EXPECT_TRUE(is_winograd(fast_winograd)) << fast_winograd.kernel->implementation();
  ASSERT_FALSE(fast_winograd.notes.empty());
  EXPECT_NE(fast_winograd.notes.back().find("-> winograd"), std::string::npos)
      << fast_winograd.notes.back();
  const std::string cache = dir.file("d.json");
  Tuned fast_direct = make_tuned(d, measuring(cache), {{"direct", 1e-3}, {"winograd", 2.0}});
  EXPECT_FALSE(is_winograd(fast_direct)) << fast_direct.kernel->implementation();
  // Cached: a clock that now prefers Winograd is not asked.
  Tuned again = make_tuned(d, measuring(cache), {{"winograd", 1e-6}});
  EXPECT_EQ(again.measurements, 0);
  EXPECT_FALSE(is_winograd(again));
  // Both compute the convolution.
  for (const Tuned* t : {&fast_winograd, &fast_direct}) {
    auto ref = make_backend("reference")->conv(d, plain_format(src_shape(d), DType::f32));
    auto dnn = make_backend("onednn");
    const auto x = random_floats(static_cast<size_t>(src_shape(d).numel()), 7);
    const auto w = random_floats(static_cast<size_t>(d.in_channels * d.out_channels * 9), 8);
    const auto b = random_floats(static_cast<size_t>(d.out_channels), 9);
    std::vector<float> want(static_cast<size_t>(dst_shape(d).numel()));
    ref->forward(x.data(), w.data(), b.data(), want.data(), nullptr);
    FormattedBuffer xs(*dnn, t->kernel->src_format(), x), ys(*dnn, t->kernel->dst_format());
    Buffer scratch(t->kernel->scratch_bytes());
    t->kernel->forward(xs.data(), w.data(), b.data(), ys.data(), scratch.data());
    expect_close(ys.get(), want, 1e-4, t->kernel->implementation());
  }
}

TEST(OneDnnLayoutTuner, CachedChoiceIsUsedWithoutTiming) {
  TempDir dir;
  const test::ScopedEnv no_winograd("CREST_WINOGRAD", "0");  // layouts only
  const ConvDesc d = small_conv();
  const std::string cache = dir.file("layouts.json");
  Tuned first = make_tuned(d, measuring(cache), {{"channels_last", 1e-3}});
  ASSERT_EQ(first.kernel->src_format().layout, Layout::channels_last);
  // A later run whose clock would now prefer the blocked layout keeps the cached choice.
  Tuned second = make_tuned(d, measuring(cache), {{"any", 1e-3}, {"blocked", 1e-3}});
  EXPECT_EQ(second.measurements, 0);
  EXPECT_EQ(second.kernel->src_format().layout, Layout::channels_last);
  EXPECT_TRUE(second.notes.empty());
}

TEST(OneDnnLayoutTuner, DamagedCacheIsWarnedAboutOnceAndReplaced) {
  TempDir dir;
  const test::ScopedEnv no_winograd("CREST_WINOGRAD", "0");  // layouts only
  const std::string cache = dir.file("layouts.json");
  {
    std::ofstream out(cache);
    out << "{\"version\": 1, \"machines\": {\"x\": [";  // cut off
  }
  int measurements = 0;
  std::vector<std::string> notes;
  auto ctx = std::make_shared<onednn::Context>();
  LayoutTuner tuner(
      measuring(cache),
      std::make_unique<FakeTimer>(std::map<std::string, double>{{"any", 1e-3}, {"blocked", 1e-3}},
                                  &measurements),
      [&](const std::string& line) { notes.push_back(line); });
  for (int64_t size : {5, 6}) {
    const ConvDesc d = small_conv(size);
    auto k = onednn::make_conv(ctx, d, plain_format(src_shape(d), DType::f32), &tuner);
    EXPECT_EQ(k->src_format().layout, Layout::blocked);
  }
  EXPECT_GT(measurements, 0);
  int warnings = 0;
  for (const auto& n : notes)
    if (n.find("warning") != std::string::npos) {
      ++warnings;
      EXPECT_NE(n.find(cache), std::string::npos) << n;
      EXPECT_NE(n.find("not valid JSON"), std::string::npos) << n;
    }
  EXPECT_EQ(warnings, 1);
  // Rewritten whole, with both problems under this machine.
  const nlohmann::json j = read_json(cache);
  ASSERT_TRUE(j["machines"].contains(onednn::machine_signature()));
  EXPECT_EQ(j["machines"][onednn::machine_signature()].size(), 2u);
}

TEST(OneDnnLayoutTuner, CacheIsKeyedByThreadsAndGeometry) {
  TempDir dir;
  const test::ScopedEnv no_winograd("CREST_WINOGRAD", "0");  // layouts only
  const std::string cache = dir.file("layouts.json");
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::string one = onednn::machine_signature();
  Tuned a = make_tuned(small_conv(6), measuring(cache), {{"channels_last", 1e-3}});
  EXPECT_GT(a.measurements, 0);
  Tuned same = make_tuned(small_conv(6), measuring(cache), {});
  EXPECT_EQ(same.measurements, 0);
  Tuned other_size = make_tuned(small_conv(7), measuring(cache), {});
  EXPECT_GT(other_size.measurements, 0);
  omp_set_num_threads(2);
  const std::string two = onednn::machine_signature();
  Tuned other_threads = make_tuned(small_conv(6), measuring(cache), {});
  omp_set_num_threads(saved);
  EXPECT_NE(one, two);
  EXPECT_GT(other_threads.measurements, 0);
  const nlohmann::json j = read_json(cache);
  EXPECT_EQ(j["machines"][one].size(), 2u);
  EXPECT_EQ(j["machines"][two].size(), 1u);
}

TEST(OneDnnLayoutTuner, TunedKernelsAgreeWithTheReference) {
  TempDir dir;
  for (bool transposed : {false, true}) {
    const ConvDesc d = small_conv(5, transposed);
    std::set<std::string> layouts;
    for (const char* favourite : {"channels_last", "blocked", "any", "hint+same"}) {
      SCOPED_TRACE(std::string(favourite) + (transposed ? " transposed" : ""));
      Tuned t =
          make_tuned(d, measuring(dir.file(std::string(favourite) + ".json")), {{favourite, 1e-3}});
      layouts.insert(t.kernel->src_format().str() + "/" + t.kernel->dst_format().str());
      expect_agrees_with_reference(d, *t.kernel);
    }
    EXPECT_GE(layouts.size(), 2u);  // the favourites really gave different kernels
  }
}

TEST(OneDnnLayoutTuner, ResumeUsesTheRecordedLayouts) {
  TempDir dir;
  const test::ScopedEnv no_winograd("CREST_WINOGRAD", "0");  // layouts only
  const ConvDesc d = small_conv();
  const std::string record = dir.file("layouts.rank0.json");
  LayoutTuning fresh = measuring(dir.file("cache1.json"));
  fresh.record_file = record;
  Tuned first = make_tuned(d, fresh, {{"channels_last", 1e-3}});
  ASSERT_EQ(first.kernel->src_format().layout, Layout::channels_last);
  ASSERT_TRUE(std::filesystem::exists(record));

  // Another machine's cache, a clock preferring blocked: the record still decides.
  LayoutTuning resumed = measuring(dir.file("cache2.json"));
  resumed.record_file = record;
  resumed.reuse_record = true;
  Tuned second = make_tuned(d, resumed, {{"any", 1e-3}, {"blocked", 1e-3}});
  EXPECT_EQ(second.measurements, 0);
  EXPECT_EQ(second.kernel->src_format().layout, Layout::channels_last);

  // A fresh run in the same directory forgets the old record at once.
  LayoutTuning again;
  again.record_file = record;
  LayoutTuner forget(again, std::make_unique<FakeTimer>(std::map<std::string, double>{}, nullptr));
  EXPECT_FALSE(std::filesystem::exists(record));
}

TEST(OneDnnLayoutTuner, DamagedRecordRefusesTheResume) {
  TempDir dir;
  const std::string record = dir.file("layouts.rank0.json");
  {
    std::ofstream out(record);
    out << "garbage";
  }
  LayoutTuning resumed = measuring(dir.file("cache.json"));
  resumed.record_file = record;
  resumed.reuse_record = true;
  try {
    LayoutTuner t(resumed, onednn::make_clock_timer());
    FAIL() << "a damaged record was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_NE(std::string(e.what()).find(record), std::string::npos) << e.what();
  }
}

TEST(OneDnnLayoutTuner, RunTuningFollowsTheConfigAndTheResumedRun) {
  TempDir dir;
  Config c;
  c.crest.autotune = true;
  const std::string run = dir.file("run");
  std::filesystem::create_directories(run);
  // A fresh run measures as configured and records per rank.
  const LayoutTuning fresh = run_layout_tuning(c, run, 3, false);
  EXPECT_TRUE(fresh.measure);
  EXPECT_FALSE(fresh.reuse_record);
  EXPECT_EQ(fresh.record_file, run + "/layouts.rank3.json");
  // Resuming a run that left no record (it was not tuned): not tuned now either.
  const LayoutTuning untuned = run_layout_tuning(c, run, 3, true);
  EXPECT_FALSE(untuned.measure);
  EXPECT_FALSE(untuned.reuse_record);
  // Resuming a tuned run: its record, whatever crest.autotune says now.
  std::ofstream(fresh.record_file) << "{}";
  c.crest.autotune = false;
  const LayoutTuning tuned = run_layout_tuning(c, run, 3, true);
  EXPECT_TRUE(tuned.reuse_record);
  EXPECT_TRUE(tuned.measure);
  EXPECT_EQ(run_layout_tuning(c, run, 3, false).measure, false);
  // No run directory: nothing recorded.
  EXPECT_EQ(run_layout_tuning(c, "", 0, false).record_file, "");
}

}  // namespace
}  // namespace crest
