// LARS and LARC on the onednn backend: range_sum_squares gives the same bits for every thread
// count and agrees with the reference backend (and with sum_squares range by range); the f32
// lars_update gives the reference backend's bits (both compute in double and round once); whole
// LARS and LARC steps (over SGD and Adam) on a parameter store agree with the reference backend's
// to float rounding (the norms are summed in another order).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "backend/backend_test_util.hpp"
#include "crest/optim/larc.hpp"
#include "crest/optim/lars.hpp"
#include "support/alloc_counter.hpp"

namespace crest {
namespace {

using testing::random_floats;

// Ranges with gaps between them, of every kind the chunking meets: one cut by several chunk
// boundaries, tiny ones, an empty one, one ending at the buffer's end.
const std::vector<ElementRange> kRanges{{0, 70'000},     {70'016, 3},  {70'032, 0},
                                        {70'032, 5'000}, {75'040, 64}, {75'104, 24'899}};
constexpr size_t kCount = 100'003;

TEST(OneDnnLars, RangeSumSquaresIsThreadCountIndependentAndAgrees) {
  auto ref_backend = make_backend("reference");
  auto dnn_backend = make_backend("onednn");
  auto ref = ref_backend->vector_ops(DType::f32);
  auto dnn = dnn_backend->vector_ops(DType::f32);
  const auto a = random_floats(kCount, 61), b = random_floats(kCount, 62, -3.f, 3.f);
  const size_t n = kRanges.size();
  std::vector<double> ra(n), rb(n), first_a, first_b;
  ref->range_sum_squares(a.data(), b.data(), kRanges.data(), n, ra.data(), rb.data());
  for (int threads : {1, 2, 3}) {
    dnn_backend->set_threads(threads);
    std::vector<double> da(n, -1.0), db(n, -1.0);
    dnn->range_sum_squares(a.data(), b.data(), kRanges.data(), n, da.data(), db.data());
    if (first_a.empty()) first_a = da, first_b = db;
    EXPECT_EQ(da, first_a) << threads << " threads";
    EXPECT_EQ(db, first_b) << threads << " threads";
    for (size_t r = 0; r < n; ++r) {
      EXPECT_NEAR(da[r], ra[r], 1e-12 * ra[r]) << "range " << r;
      EXPECT_NEAR(db[r], rb[r], 1e-12 * rb[r]) << "range " << r;
      const double alone = dnn->sum_squares(a.data() + kRanges[r].offset, kRanges[r].count);
      EXPECT_NEAR(da[r], alone, 1e-12 * alone) << "range " << r;
    }
  }
  EXPECT_EQ(first_a[2], 0.0);  // the empty range
  // A handful of small ranges: one chunk, the serial path.
  const std::vector<ElementRange> small{{0, 7}, {64, 1}};
  double sa[2], sb[2];
  dnn->range_sum_squares(a.data(), b.data(), small.data(), 2, sa, sb);
  EXPECT_NEAR(sa[1], double(a[64]) * a[64], 1e-15);
  EXPECT_NEAR(sb[0], ref->sum_squares(b.data(), 7), 1e-12);
}

TEST(OneDnnLars, UpdateIsBitExactWithTheReference) {
  auto ref_backend = make_backend("reference");
  auto dnn_backend = make_backend("onednn");
  auto ref = ref_backend->vector_ops(DType::f32);
  auto dnn = dnn_backend->vector_ops(DType::f32);
  const auto w = random_floats(kCount, 63), g = random_floats(kCount, 64, -0.1f, 0.1f);
  for (int threads : {1, 2}) {
    dnn_backend->set_threads(threads);
    std::vector<float> w1 = w, w2 = w, b1(kCount, 0.f), b2(kCount, 0.f);
    for (int step = 0; step < 3; ++step) {
      ref->lars_update(w1.data(), g.data(), b1.data(), kCount, 0.1, 0.9, 0.037, 5e-4);
      dnn->lars_update(w2.data(), g.data(), b2.data(), kCount, 0.1, 0.9, 0.037, 5e-4);
    }
    EXPECT_EQ(w2, w1) << threads << " threads";
    EXPECT_EQ(b2, b1);
  }
}

ParamSlot slot(const std::string& name, int64_t n, bool trainable = true) {
  ParamSlot s;
  s.name = name;
  s.shape = Shape{n};
  s.spec.trainable = trainable;
  return s;
}

// Three steps of `make()`'s optimizer on the same store on both backends.
template <typename Make>
void expect_steps_agree(Make make) {
  auto ref_backend = make_backend("reference");
  auto dnn_backend = make_backend("onednn");
  const std::vector<ParamSlot> slots{slot("big.weight", 70'000), slot("bn.running_mean", 64, false),
                                     slot("big.bias", 64), slot("mid.weight", 5'000),
                                     slot("bn.bn.weight", 64)};
  ParamStore a(slots, DType::f32, *ref_backend), b(slots, DType::f32, *dnn_backend);
  for (size_t s = 0; s < slots.size(); ++s) {
    const size_t n = a.slots()[s].count;
    const auto w = random_floats(n, 90 + static_cast<uint32_t>(s));
    std::copy(w.begin(), w.end(), a.value(s).as<float>());
    std::copy(w.begin(), w.end(), b.value(s).as<float>());
  }
  std::unique_ptr<Optimizer> oa = make(), ob = make();
  oa->attach(a, a.ops());
  ob->attach(b, b.ops());
  for (int step = 0; step < 3; ++step) {
    for (size_t s = 0; s < slots.size(); ++s) {
      const size_t n = a.slots()[s].count;
      const auto g = random_floats(
          n, 100 + static_cast<uint32_t>(10 * static_cast<size_t>(step) + s), -0.02f, 0.02f);
      std::copy(g.begin(), g.end(), a.grad(s).as<float>());
      std::copy(g.begin(), g.end(), b.grad(s).as<float>());
    }
    oa->step(0.05 * (step + 1));
    ob->step(0.05 * (step + 1));
  }
  for (size_t s = 0; s < slots.size(); ++s) {
    double worst = 0;
    for (size_t i = 0; i < a.slots()[s].count; ++i)
      worst = std::max(
          worst, std::abs(double(a.value(s).as<float>()[i]) - double(b.value(s).as<float>()[i])));
    EXPECT_LT(worst, 1e-6) << oa->name() << " " << a.slots()[s].name;
  }
}

TEST(OneDnnLars, LarsStepAgreesWithTheReferenceBackend) {
  expect_steps_agree([] {
    return std::make_unique<Lars>(
        LarsOptions{.momentum = 0.9, .trust_coefficient = 0.01, .weight_decay = 5e-4});
  });
}

TEST(OneDnnLars, LarcStepsAgreeWithTheReferenceBackend) {
  for (LarcMode mode : {LarcMode::clip, LarcMode::scale}) {
    expect_steps_agree([mode] {
      return std::make_unique<Larc>(std::make_unique<SgdKeras>(0.9),
                                    LarcOptions{.mode = mode, .weight_decay = 5e-4});
    });
    expect_steps_agree([mode] {
      return std::make_unique<Larc>(std::make_unique<Adam>(0.9, 0.999, 1e-8, 0.0, false),
                                    LarcOptions{.mode = mode, .weight_decay = 5e-4});
    });
  }
}

// Like a training step, an optimizer step allocates nothing: the ranges and the norm arrays are
// sized at attach(), the chunk pieces live on the stack.
TEST(OneDnnLars, StepsAllocateNothing) {
  for (const char* backend_name : {"reference", "onednn"}) {
    auto backend = make_backend(backend_name);
    ParamStore ps({slot("big.weight", 70'000), slot("big.bias", 64), slot("mid.weight", 5'000)},
                  DType::f32, *backend);
    const auto w = random_floats(75'064, 5);
    for (size_t s = 0; s < 3; ++s) {
      std::copy_n(w.begin(), ps.slots()[s].count, ps.value(s).as<float>());
      std::copy_n(w.rbegin(), ps.slots()[s].count, ps.grad(s).as<float>());
    }
    Lars lars(LarsOptions{.momentum = 0.9});
    Larc larc(std::make_unique<Adam>(0.9, 0.999, 1e-8, 0.0, false), LarcOptions{});
    for (Optimizer* o : std::initializer_list<Optimizer*>{&lars, &larc}) {
      o->attach(ps, ps.ops());
      o->step(0.1);  // warm-up: the OpenMP thread pool starts once
      test::AllocationStats stats;
      {
        test::AllocationCounter counter;
        o->step(0.1);
        stats = counter.stats();
      }
      EXPECT_EQ(stats.count, 0u) << backend_name << " " << o->name();
    }
  }
}

}  // namespace
}  // namespace crest
