// Synthetic CosmoFlow samples that a 3-D CNN can learn from: the four targets set the statistics
// of a log-normal density field (mean density, amplitude, spectral slope, growth across the four
// redshift channels), sampled as Poisson particle counts. docs/synthetic-data.md has the model.
//
// A sample is a pure function of (seed, index): the same bytes for any OpenMP thread count, and
// any sample can be made without the ones before it.
#pragma once
#include <cstdint>

namespace crest {

struct CosmoflowSampleSpec {
  int64_t size = 128;    // D = H = W; a product of 2s and 3s (32, 64, 96, 128, ...)
  int64_t channels = 4;  // redshift snapshots, earliest first
};

// The physical parameters one target vector sets (each target moves exactly one of them).
struct CosmoflowParameters {
  double mean_count;  // t0: mean particles per voxel (Omega_m-like), 6 exp(0.6 t0)
  double sigma;       // t1: std of the Gaussian log-density in the last channel (sigma_8-like)
  double slope;       // t2: spectral index n of P(k) ~ k^n (n_s-like), -2 + 0.6 t2
  double growth;      // t3: log-amplitude growth from the first channel to the last, 0.6 + 0.4 t3
};

CosmoflowParameters cosmoflow_parameters(const float targets[4]);

// Writes the sample's 4 targets (uniform in [-1, 1]) and its volume [size, size, size, channels]
// (C order, channels last) of non-negative particle counts.
void generate_cosmoflow_sample(uint64_t seed, int64_t index, const CosmoflowSampleSpec& spec,
                               int16_t* volume, float* targets);

}  // namespace crest
