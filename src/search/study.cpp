// A study on the job's ranks (crest/search/study.hpp): checks before training, the split into
// groups, world rank 0's coordinator and the message service for the other group leaders, and
// each group's loop of trials.
#include "crest/search/study.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "checkpoint_transfer.hpp"
#include "coordinator.hpp"
#include "crest/core/error.hpp"
#include "crest/search/pbt.hpp"
#include "crest/search/scheduler.hpp"
#include "crest/search/search_space.hpp"
#include "crest/train/config.hpp"
#include "crest/train/trainer.hpp"
#include "messages.hpp"
#include "study_plan.hpp"
#include "study_records.hpp"
#include "study_state.hpp"
#include "trial_runner.hpp"

namespace crest {
namespace fs = std::filesystem;
using namespace search_detail;

namespace {

void pause_ms(long ms) {
  const timespec t{ms / 1000, (ms % 1000) * 1'000'000};
  nanosleep(&t, nullptr);
}

// A leader's messages to the coordinator: a direct call on world rank 0, a message elsewhere.
class SchedulerLink {
 public:
  SchedulerLink(Communicator& world, Coordinator* local, double timeout_s)
      : world_(world), local_(local), timeout_s_(timeout_s) {}
  void tell(const nlohmann::json& m) {
    if (local_)
      local_->handle(m);
    else
      world_.send(0, kToScheduler, to_bytes(m));
  }
  // One question: a trial to run, wait (the study's last trials are still running and may yet be
  // promoted), or done.
  Work ask_for_work(int group) {
    const nlohmann::json request = {{"op", "next"}, {"group", group}};
    if (local_) return work_from_json(local_->handle(request));
    world_.send(0, kToScheduler, to_bytes(request));
    return work_from_json(
        from_bytes(world_.receive(0, kToLeader, timeout_s_, "the study's scheduler").bytes));
  }

 private:
  Communicator& world_;
  Coordinator* local_;
  double timeout_s_;
};

// The leader's Work to every rank of its group.
Work broadcast_work(Communicator& group, const Work& mine) {
  std::vector<std::byte> bytes =
      group.rank() == 0 ? to_bytes(work_to_json(mine)) : std::vector<std::byte>{};
  uint64_t n = bytes.size();
  group.broadcast(&n, sizeof n, 0);
  bytes.resize(n);
  group.broadcast(bytes.data(), n, 0);
  return work_from_json(from_bytes(bytes));
}

// Returns the stop reason when a run was preempted (a stop signal, the time budget: the job is
// ending), "" when the study is done.
std::string run_group(const StudyPlan& plan, int group_index, Communicator& group,
                      SchedulerLink& link,
                      const std::function<FetchedCheckpoint(const Work&)>& fetch) {
  const std::function<void(const nlohmann::json&)> report = [&](const nlohmann::json& m) {
    link.tell(m);
  };
  for (;;) {
    // Every answer goes to the whole group at once, waits included: a rank never sits in a
    // collective for longer than one question takes (the watchdog's dist.timeout_s).
    const Work w =
        broadcast_work(group, group.rank() == 0 ? link.ask_for_work(group_index) : Work{});
    if (w.kind == Work::Kind::done) return "";
    if (w.kind == Work::Kind::wait) {
      pause_ms(200);
      continue;
    }
    const TrialOutcome o = run_trial(plan.trial, w, group_index, group, report, fetch);
    // The trial stays running in the scheduler's state: --resume continues it from the
    // checkpoint its run wrote on the way out.
    if (o.preempted) return o.message;
    if (group.rank() == 0)
      link.tell({{"op", "end"},
                 {"trial", w.trial},
                 {"group", group_index},
                 {"ok", o.ok},
                 {"stopped_early", o.stopped_early},
                 {"message", o.message}});
  }
}

// World rank 0 answers the other group leaders until every group has been told the study is done.
void serve_leaders(Communicator& world, Coordinator& coordinator) {
  try {
    while (!coordinator.all_groups_done() && !coordinator.stopped()) {
      auto m = world.try_receive(Communicator::kAnySource, kToScheduler);
      if (!m) {
        pause_ms(1);
        continue;
      }
      const nlohmann::json reply = coordinator.handle(from_bytes(m->bytes));
      if (!reply.is_null()) world.send(m->source, kToLeader, to_bytes(reply));
    }
  } catch (const std::exception& e) {
    // The groups would wait for answers forever: end the job with the reason.
    std::fprintf(stderr, "crest: error: the study's scheduler failed: %s\n", e.what());
    std::fflush(stderr);
    abort_parallel_job(1);
    std::_Exit(1);
  }
}

std::string best_config_yaml(const TrialSetup& setup, const Assignment& params, int epochs) {
  std::vector<std::string> overrides = setup.overrides;
  for (const auto& o : as_overrides(params)) overrides.push_back(o);
  overrides.push_back("output_dir=" + setup.out_dir + "/best");
  overrides.push_back("data.n_epochs=" + std::to_string(epochs));
  return load_config(setup.base_config, overrides).resolved_yaml;
}

// Errors found before training are found by every rank alike: rank 0 prints, the rest exit.
template <class F>
auto on_every_rank(Communicator& world, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.kind() == ErrorKind::runtime ? ErrorKind::runtime : e.kind(), e.what(),
                world.rank() == 0 ? Error::Scope::every_rank_printed_here
                                  : Error::Scope::every_rank_printed_elsewhere);
  }
}

std::string describe(const StudyOptions& o, int groups) {
  const char* names[] = {"random", "grid", "asha", "pbt"};
  return std::string(names[static_cast<int>(o.algorithm)]) + ", seed " + std::to_string(o.seed) +
         ", " + std::to_string(groups) + " group(s) of " + std::to_string(o.ranks_per_trial) +
         " rank(s); base config " + o.base_config + ", space " + o.space;
}

}  // namespace

StudySummary run_study(const StudyOptions& options, Communicator& world, std::ostream& log) {
  StudyPlan plan = on_every_rank(world, [&] {
    StudyPlan p = plan_study(options, world.size());
    if (!options.resume && fs::exists(options.out_dir + "/trials.jsonl"))
      throw_usage(options.out_dir +
                  " holds a study already (trials.jsonl): continue it with crest search --resume " +
                  options.out_dir + ", or choose another --out");
    return p;
  });
  // A study killed before its first decision has no state.json yet: it starts from nothing.
  std::optional<SchedulerState> saved;
  if (options.resume && fs::exists(options.out_dir + "/state.json"))
    saved = on_every_rank(world, [&] {
      SchedulerState state = read_state(options.out_dir);
      // Each PBT group holds its member: as many groups must resume them.
      const size_t groups = state.member_of_group.size();
      if (options.algorithm == SearchAlgorithm::pbt && groups != static_cast<size_t>(plan.groups))
        throw_usage(options.out_dir + ": the pbt study ran on " + std::to_string(groups) +
                    " groups; resume it on as many, not " + std::to_string(plan.groups));
      return state;
    });
  if (world.rank() == 0 && !options.resume) {
    fs::create_directories(options.out_dir + "/trials");
    write_study_options(options);
  }
  if (plan.base_threads == 0) {
    Config threads_left_to_crest;
    threads_left_to_crest.crest.threads = 0;
    plan.trial.threads = compute_threads_per_rank(threads_left_to_crest, world.local_size());
  }
  const int group_index = world.rank() / options.ranks_per_trial;
  std::unique_ptr<Communicator> group = world.split(group_index, world.rank());

  std::unique_ptr<Coordinator> coordinator;
  std::thread server;
  if (world.rank() == 0) {
    std::vector<std::string> keys;
    for (const auto& p : plan.space.parameters) keys.push_back(p.key);
    const auto params = [&plan, seed = options.seed](int i) {
      return plan.grid.empty() ? sample_trial(plan.space, seed, static_cast<uint64_t>(i))
                               : plan.grid[static_cast<size_t>(i)];
    };
    CoordinatorSetup setup{plan.trial.metric,
                           plan.groups,
                           [&plan](const Assignment& a, int epochs) {
                             return best_config_yaml(plan.trial, a, epochs);
                           },
                           options.out_dir,
                           describe(options, plan.groups),
                           plan.settings.lower_is_better,
                           keys};
    Scheduler scheduler(plan.settings, params);
    if (options.algorithm == SearchAlgorithm::pbt)
      scheduler.enable_pbt(plan.pbt, plan.groups, options.seed,
                           [&plan, seed = options.seed](const Assignment& a, uint64_t decision) {
                             return perturb(plan.space, a, plan.pbt, seed, decision);
                           });
    coordinator =
        std::make_unique<Coordinator>(std::move(setup), std::move(scheduler),
                                      StudyRecords(options.out_dir, keys, options.resume), log);
    if (saved) coordinator->restore(std::move(*saved));
    log << "crest search: " << plan.groups << " group(s) of " << options.ranks_per_trial
        << " rank(s), " << plan.settings.trials << " trials, optimising " << plan.trial.metric
        << (plan.settings.lower_is_better ? " (lower is better)" : " (higher is better)")
        << ", results in " << options.out_dir << "\n";
    if (options.resume)
      log << "resuming: " << coordinator->scheduler().started() << " trials started before\n";
    if (plan.groups > 1) server = std::thread([&] { serve_leaders(world, *coordinator); });
  }
  world.barrier();  // the study directory exists before any group writes into it

  SchedulerLink link(world, coordinator.get(), 3600);
  StudySummary summary;
  {
    // PBT: every leader serves its member's checkpoints to the others for the whole study.
    std::unique_ptr<CheckpointServer> checkpoints;
    if (options.algorithm == SearchAlgorithm::pbt && group->rank() == 0)
      checkpoints = std::make_unique<CheckpointServer>(world, options.out_dir);
    const int k = options.ranks_per_trial;
    summary.preempted = run_group(plan, group_index, *group, link, [&world, k](const Work& w) {
      return fetch_checkpoint(world, w.copy_from_group * k, w.copy_from, w.copy_epoch);
    });
  }

  if (coordinator) {
    // Preempted, the job is ending: the other groups are stopping too, nobody waits for answers.
    if (!summary.preempted.empty()) coordinator->stop();
    if (server.joinable()) server.join();
    coordinator->finish();
    const Scheduler& s = coordinator->scheduler();
    summary.trials = s.started();
    for (const auto& t : s.trials()) {
      summary.completed += t.status == TrialStatus::completed;
      summary.pruned += t.status == TrialStatus::pruned;
      summary.failed += t.status == TrialStatus::failed;
    }
    if (const auto b = s.best()) {
      summary.best_trial = *b;
      summary.best_metric = s.best_metric();
    }
  }
  // No barrier: groups that finish first would wait in it for the last trial, past the
  // watchdog's deadline. Rank 0 writes the results after every group was told it is done.
  return summary;
}

}  // namespace crest
