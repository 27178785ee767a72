// Pipeline schedules (issue 35's pipeline stages, docs/distributed.md "Not yet"): what each stage
// of a K-stage pipeline does, in order, with M micro-batches — its forwards and backwards and the
// point-to-point messages between neighbouring stages — and a validator that runs those orders
// against each other without any kernel.
//
// - GPipe (Huang et al., 2019): every forward, then every backward. Each stage keeps all M
//   micro-batches' activations.
// - 1F1B (PipeDream-Flush, Narayanan et al., 2021): stage s first runs min(K - s - 1, M) forwards,
//   then alternates one forward and one backward, then drains the backwards. Stage s keeps at most
//   min(K - s, M) micro-batches' activations.
// Both have the bubble (K - 1) / (M + K - 1) when every stage takes the same time.
//
// A stage's forward of micro-batch m is preceded by receiving m's activation from the stage
// before (not on the first stage) and followed by sending its own to the stage after (not on the
// last); a backward of m is preceded by receiving m's output gradient from the stage after (not on
// the last) and followed by sending its input gradient to the stage before (not on the first).
// Sends never block (nonblocking sends, waited for later); receives wait for their message.
#pragma once
#include <string>
#include <vector>

namespace crest {

enum class PipelineScheduleKind { gpipe, one_forward_one_backward };

struct PipelineAction {
  enum class Kind {
    forward,
    backward,
    send_activation,
    receive_activation,
    send_gradient,
    receive_gradient
  };
  Kind kind = Kind::forward;
  int micro_batch = 0;
};
std::string describe(const PipelineAction& a);  // "receive the gradient of micro-batch 3"

// Per stage, its actions in order.
using PipelinePlan = std::vector<std::vector<PipelineAction>>;

// Throws crest::Error (usage) unless stages >= 1 and micro_batches >= 1.
PipelinePlan make_pipeline_plan(PipelineScheduleKind kind, int stages, int micro_batches);

struct PipelineCheck {
  // "" when every stage finishes, each micro-batch's forward and backward run once per stage in a
  // valid order and every message is received; else the first problem, naming the stage.
  std::string problem;
  // Per stage: the most micro-batches whose forward had run and whose backward had not.
  std::vector<int> peak_activations;
  // 1 - busy / makespan, with a forward taking `forward_cost` and a backward `backward_cost` on
  // every stage and messages arriving at once: the share of the pipeline's time stages are idle.
  double bubble_fraction = 0;
};

// Runs every stage's order against the others (an event simulation, no kernels).
PipelineCheck check_pipeline_plan(const PipelinePlan& plan, int micro_batches,
                                  double forward_cost = 1, double backward_cost = 2);

}  // namespace crest
