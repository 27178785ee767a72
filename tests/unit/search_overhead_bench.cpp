// The scheduler's cost per decision (docs/search.md "Overhead and scale"): a benchmark, not a
// test, so it is disabled; run it alone with
//   build/bin/crest_tests --gtest_also_run_disabled_tests --gtest_filter='*SearchOverhead*'
// It drives the coordinator as world rank 0 does, with every record written (trials.jsonl,
// state.json after each decision, trials.csv and report.html after each run), for groups that
// each report every epoch, and prints the time per message.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "search/coordinator.hpp"
#include "search/messages.hpp"
#include "support/cli_util.hpp"

namespace crest {
namespace {

using namespace search_detail;

void measure(int groups, int trials, int epochs, bool asha) {
  test::TempDir d;
  SchedulerSettings s;
  s.trials = trials;
  s.max_epochs = epochs;
  s.min_epochs = asha ? 1 : epochs;
  s.eta = 3;
  Scheduler scheduler(s, [](int i) {
    return Assignment{{"lr_schedule.base_lr", std::to_string(1e-3 * (1 + i % 97))},
                      {"data.batch_size", std::to_string(2 << (i % 3))}};
  });
  CoordinatorSetup setup{"val_mae",
                         groups,
                         [](const Assignment&, int) { return std::string("output_dir: x\n"); },
                         d.file(""),
                         "benchmark",
                         true,
                         {"lr_schedule.base_lr", "data.batch_size"}};
  std::ostringstream log;
  Coordinator c(setup, std::move(scheduler), StudyRecords(d.file(""), setup.keys, false), log);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  int64_t messages = 0;
  std::vector<Work> work(static_cast<size_t>(groups));
  std::vector<int> at(static_cast<size_t>(groups), 0);
  bool any = true;
  // Rounds: every group with work reports one epoch; a group at its run's end reports the end
  // and asks for more.
  for (int g = 0; g < groups; ++g)
    work[static_cast<size_t>(g)] = work_from_json(c.handle({{"op", "next"}, {"group", g}})),
    ++messages;
  while (any) {
    any = false;
    for (int g = 0; g < groups; ++g) {
      Work& w = work[static_cast<size_t>(g)];
      if (w.kind != Work::Kind::run) continue;
      any = true;
      int& e = at[static_cast<size_t>(g)];
      ++e;
      const double metric = 1.0 / e + 0.01 * (w.trial % 13);
      c.handle({{"op", "epoch"},
                {"trial", w.trial},
                {"group", g},
                {"epoch", e},
                {"metric", metric},
                {"figures", {{"train_loss", metric}, {"val_loss", metric}, {"val_mae", metric}}},
                {"seconds", 1.0}});
      ++messages;
      if (e < w.epochs) continue;
      c.handle({{"op", "end"},
                {"trial", w.trial},
                {"group", g},
                {"ok", true},
                {"stopped_early", false},
                {"message", ""}});
      w = work_from_json(c.handle({{"op", "next"}, {"group", g}}));
      e = w.resume
              ? static_cast<int>(c.scheduler().trials()[static_cast<size_t>(w.trial)].metric.size())
              : 0;
      messages += 2;
    }
  }
  const double s_total = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "%s: %d groups, %d trials, %d epochs: %lld messages in %.3f s = %.3f ms per message\n",
      asha ? "asha" : "random", groups, trials, epochs, static_cast<long long>(messages), s_total,
      1e3 * s_total / static_cast<double>(messages));
}

TEST(DISABLED_SearchOverhead, CoordinatorTimePerMessage) {
  measure(8, 27, 9, true);
  measure(64, 243, 9, true);
  measure(1000, 1000, 4, false);
}

}  // namespace
}  // namespace crest
