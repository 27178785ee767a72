// A machine as the scaling model sees it (crest plan, docs/scaling.md): nodes, ranks and cores
// per node, compute rate, links, storage, and what crest's own benchmarks measured on it
// (crest plan calibrate). Read from and written to a YAML file; every wrong value is refused
// naming the file, the line and the key.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crest {

struct Link {
  double gb_s = 0;        // bandwidth, 10^9 bytes/s
  double latency_us = 0;  // per message
};

// One op of a `crest bench train --profile` run, per sample.
struct MeasuredLayer {
  std::string name;
  double forward_s = 0, backward_s = 0;
  double forward_flops = 0;  // to tell the same layer from one of the same name at another size
};

// One `crest bench train --profile` run: on one rank (no communication in it), on `node_ranks`
// ranks of one node each training alone (--independent: rank 0's times while the others
// computed beside it), or on one spatial group (`spatial`: the layers' times are rank 0's on its
// block, halo exchanges included).
struct MeasuredTraining {
  std::string model, backend, precision;
  std::vector<int> spatial;  // dist.spatial of the run; empty: unsplit
  int threads = 1;
  int node_ranks = 1;  // ranks computing on the node at once
  int64_t batch = 1;
  double step_s = 0;    // best step
  double update_s = 0;  // the optimizer's share of the best step
  size_t trainable_bytes = 0;
  std::vector<MeasuredLayer> layers;
};

// A fit of `crest bench allreduce` on `ranks` ranks of one node to the ring model
// t = 2 (n-1) latency + 2 (n-1)/n bytes / bandwidth.
struct MeasuredAllreduce {
  int ranks = 2;
  int sizes = 0;  // message sizes fitted
  Link link;
};

// One `crest bench loader` run on one rank: what its loader delivered end to end (read, inflate,
// decode) with `threads` reader threads, for samples of `sample_shape` (the decoded x,
// channels last) in `format`.
struct MeasuredLoader {
  std::string format;  // the source's: "cosmoflow-tfrecord", "deepcam-hdf5", ...
  std::vector<int64_t> sample_shape;
  int threads = 1;
  double samples_per_s = 0;  // the best epoch's
  double payload_bytes_per_sample = 0;
};

struct Machine {
  std::string name;
  std::string file;        // where it was read from ("" when built in code)
  int nodes = 1;           // the most nodes a plan may use
  int ranks_per_node = 1;  // the most ranks a node runs
  // CPU nodes: the ranks of a node share its cores (threads per rank = cores / ranks on the
  // node). 0: each rank has its own device, whose rate does not depend on the other ranks.
  int cores_per_node = 0;
  double memory_gb_per_rank = 0;  // 0: not checked
  // The sustained rate where nothing was measured (one of the two, or neither).
  double gflops_per_rank = 0, gflops_per_core = 0;
  // How much a rank's step time varies from step to step (standard deviation / mean, from `crest
  // bench train`'s step_s_stdev over step_s_mean at scale): a synchronous step waits for the
  // slowest of the ranks (docs/scaling.md, "Stragglers"). 0: every rank alike.
  double step_jitter = 0;
  Link intra_node, inter_node;  // inter_node: each node's injection bandwidth
  double shared_fs_gb_s = 0;    // the file system's aggregate read bandwidth; 0: not modelled
  double node_local_gb_s = 0;   // one node's staging storage; 0: not modelled
  std::vector<MeasuredTraining> measured_training;
  std::optional<MeasuredAllreduce> measured_allreduce;
  std::vector<MeasuredLoader> measured_loader;
  // The link among the ranks of one node: the measured fit where there is one.
  Link node_link() const;
};

// Where crest plan calibrate keeps a machine file's measurements: beside it, "NAME.measured.yaml"
// for "NAME.yaml", so the description a person wrote (and its comments) is never rewritten.
std::string measured_path(const std::string& machine_file);
// Reads a machine description and, when it exists, its measurements file; crest::Error (input)
// naming the file, line and key of a wrong value.
Machine load_machine(const std::string& path);
// The YAML text of the description and of the measurements (what load_machine reads back).
std::string machine_yaml(const Machine& m);
std::string measured_yaml(const Machine& m);
// Replaces measured_path(m.file) with m's measurements atomically (a crash leaves the old file).
void save_measured(const Machine& m);

}  // namespace crest
