// Pipeline plans and their validator (crest/dist/pipeline_schedule.hpp).
#include "crest/dist/pipeline_schedule.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "crest/core/error.hpp"

namespace crest {

using Kind = PipelineAction::Kind;

std::string describe(const PipelineAction& a) {
  const std::string m = "micro-batch " + std::to_string(a.micro_batch);
  switch (a.kind) {
    case Kind::forward:
      return "the forward of " + m;
    case Kind::backward:
      return "the backward of " + m;
    case Kind::send_activation:
      return "send the activation of " + m;
    case Kind::receive_activation:
      return "receive the activation of " + m;
    case Kind::send_gradient:
      return "send the gradient of " + m;
    case Kind::receive_gradient:
      return "receive the gradient of " + m;
  }
  return "?";
}

namespace {

// A stage's forward or backward with the messages around it.
void add_forward(std::vector<PipelineAction>& out, int stage, int stages, int m) {
  if (stage > 0) out.push_back({Kind::receive_activation, m});
  out.push_back({Kind::forward, m});
  if (stage + 1 < stages) out.push_back({Kind::send_activation, m});
}

void add_backward(std::vector<PipelineAction>& out, int stage, int stages, int m) {
  if (stage + 1 < stages) out.push_back({Kind::receive_gradient, m});
  out.push_back({Kind::backward, m});
  if (stage > 0) out.push_back({Kind::send_gradient, m});
}

std::vector<PipelineAction> stage_plan(PipelineScheduleKind kind, int s, int stages, int mbs) {
  std::vector<PipelineAction> out;
  if (kind == PipelineScheduleKind::gpipe) {
    for (int m = 0; m < mbs; ++m) add_forward(out, s, stages, m);
    for (int m = 0; m < mbs; ++m) add_backward(out, s, stages, m);
    return out;
  }
  const int warmup = std::min(stages - s - 1, mbs);
  int forwards = 0, backwards = 0;
  while (forwards < warmup) add_forward(out, s, stages, forwards++);
  while (forwards < mbs) {
    add_forward(out, s, stages, forwards++);
    add_backward(out, s, stages, backwards++);
  }
  while (backwards < mbs) add_backward(out, s, stages, backwards++);
  return out;
}

// The event simulation of check_pipeline_plan: each stage's clock and place in its order, the
// messages in flight (keyed by sender, receiver, kind and micro-batch) and what each stage did.
class Simulation {
 public:
  Simulation(const PipelinePlan& plan, int micro_batches, double forward_cost, double backward_cost)
      : plan_(plan),
        mbs_(micro_batches),
        costs_{forward_cost, backward_cost},
        at_(plan.size(), 0),
        clock_(plan.size(), 0.0),
        state_(plan.size(), std::vector<int>(static_cast<size_t>(micro_batches), 0)),
        live_(plan.size(), 0) {
    result_.peak_activations.assign(plan.size(), 0);
  }

  PipelineCheck run() {
    for (bool moved = true; moved && result_.problem.empty();) {
      moved = false;
      for (size_t s = 0; s < plan_.size() && result_.problem.empty(); ++s)
        while (at_[s] < plan_[s].size() && result_.problem.empty() && step(s)) moved = true;
    }
    if (result_.problem.empty()) finish();
    return result_;
  }

 private:
  // Micro-batch progress on a stage: 0 nothing, 1 forward done, 2 backward done.
  enum : int { fresh = 0, forwarded = 1, done = 2 };
  using Key = std::tuple<int, int, int, int>;  // sender, receiver, message kind, micro-batch

  bool fail(size_t s, const std::string& why) {
    result_.problem = "stage " + std::to_string(s) + ": " + describe(plan_[s][at_[s]]) + ": " + why;
    return false;
  }

  // Runs stage s's next action if it can; false where it must wait (or the plan is wrong).
  bool step(size_t s) {
    const PipelineAction& a = plan_[s][at_[s]];
    if (a.micro_batch < 0 || a.micro_batch >= mbs_) return fail(s, "no such micro-batch");
    const int last = static_cast<int>(plan_.size()) - 1, stage = static_cast<int>(s);
    int& progress = state_[s][static_cast<size_t>(a.micro_batch)];
    switch (a.kind) {
      case Kind::send_activation:
      case Kind::send_gradient: {
        const bool up = a.kind == Kind::send_activation;
        const int to = stage + (up ? 1 : -1);
        if (to < 0 || to > last) return fail(s, "there is no stage " + std::to_string(to));
        if (up ? progress == fresh : progress != done)
          return fail(s, up ? "before its forward" : "before its backward");
        if (!sent_.emplace(Key{stage, to, static_cast<int>(a.kind), a.micro_batch}, clock_[s])
                 .second)
          return fail(s, "sent twice before it was received");
        break;
      }
      case Kind::receive_activation:
      case Kind::receive_gradient: {
        const bool up = a.kind == Kind::receive_activation;
        const int from = stage + (up ? -1 : 1);
        if (from < 0 || from > last) return fail(s, "there is no stage " + std::to_string(from));
        const Kind sent = up ? Kind::send_activation : Kind::send_gradient;
        const auto it = sent_.find({from, stage, static_cast<int>(sent), a.micro_batch});
        if (it == sent_.end()) return false;  // waits
        clock_[s] = std::max(clock_[s], it->second);
        sent_.erase(it);
        received_.insert({static_cast<int>(a.kind), stage, a.micro_batch});
        break;
      }
      case Kind::forward:
        if (progress != fresh) return fail(s, "runs twice");
        if (stage > 0 &&
            !received_.count({static_cast<int>(Kind::receive_activation), stage, a.micro_batch}))
          return fail(s, "its input activation was not received");
        progress = forwarded;
        clock_[s] += costs_[0];
        result_.peak_activations[s] = std::max(result_.peak_activations[s], ++live_[s]);
        break;
      case Kind::backward:
        if (progress != forwarded)
          return fail(s, progress == fresh ? "before its forward" : "runs twice");
        if (stage < last &&
            !received_.count({static_cast<int>(Kind::receive_gradient), stage, a.micro_batch}))
          return fail(s, "its output gradient was not received");
        progress = done;
        clock_[s] += costs_[1];
        --live_[s];
        break;
    }
    ++at_[s];
    return true;
  }

  // Every stage at its end: each micro-batch forward and backward, no message left unread.
  void finish() {
    std::string stuck;  // every stage that waits, as a deadlock involves several
    for (size_t s = 0; s < plan_.size(); ++s)
      if (at_[s] < plan_[s].size())
        stuck += std::string(stuck.empty() ? "" : ", ") + "stage " + std::to_string(s) +
                 " waits forever to " + describe(plan_[s][at_[s]]);
    if (!stuck.empty()) {
      result_.problem = "deadlock: " + stuck;
      return;
    }
    for (size_t s = 0; s < plan_.size(); ++s) {
      for (int m = 0; m < mbs_; ++m)
        if (state_[s][static_cast<size_t>(m)] != done) {
          result_.problem = "stage " + std::to_string(s) + " never runs the backward of " +
                            "micro-batch " + std::to_string(m);
          return;
        }
    }
    // No message is left unread here: each forward and backward checked that its own arrived.
    const double makespan = *std::max_element(clock_.begin(), clock_.end());
    const double busy = mbs_ * (costs_[0] + costs_[1]);
    result_.bubble_fraction = makespan > 0 ? 1 - busy / makespan : 0;
  }

  const PipelinePlan& plan_;
  int mbs_;
  double costs_[2];
  std::vector<size_t> at_;
  std::vector<double> clock_;
  std::vector<std::vector<int>> state_;
  std::vector<int> live_;
  std::map<Key, double> sent_;                    // messages sent, not yet received: when sent
  std::set<std::tuple<int, int, int>> received_;  // (receive kind, stage, micro-batch)
  PipelineCheck result_;
};

}  // namespace

PipelinePlan make_pipeline_plan(PipelineScheduleKind kind, int stages, int micro_batches) {
  if (stages < 1 || micro_batches < 1)
    throw_usage("a pipeline needs at least 1 stage and 1 micro-batch, got " +
                std::to_string(stages) + " stages and " + std::to_string(micro_batches) +
                " micro-batches");
  PipelinePlan plan;
  for (int s = 0; s < stages; ++s) plan.push_back(stage_plan(kind, s, stages, micro_batches));
  return plan;
}

PipelineCheck check_pipeline_plan(const PipelinePlan& plan, int micro_batches, double forward_cost,
                                  double backward_cost) {
  return Simulation(plan, micro_batches, forward_cost, backward_cost).run();
}

}  // namespace crest
