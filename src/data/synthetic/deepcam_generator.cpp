#include "crest/data/synthetic/deepcam_generator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "crest/core/error.hpp"
#include "crest/data/synthetic/random_field.hpp"

namespace crest {
namespace {

constexpr double kPi = 3.141592653589793;

// SPEC order, as kDeepcamChannelNames.
enum Channel : int {
  kTMQ,
  kU850,
  kV850,
  kUBOT,
  kVBOT,
  kQREFHT,
  kPS,
  kPSL,
  kT200,
  kT500,
  kPRECT,
  kTS,
  kTREFHT,
  kZ1000,
  kZ200,
  kZBOT,
  kChannels
};

// Latent fields the channels are mixed from. The first three are functions of latitude only
// (row profiles); the rest are per-pixel smooth random fields, all of unit variance.
enum Latent : int {
  kProfWarm,      // cos(lat): warm, moist tropics
  kProfPressure,  // -cos(6 lat): equatorial trough, subtropical highs, subpolar lows
  kProfJet,       // -cos(4 lat): tropical easterlies, mid-latitude westerlies
  kTemp,          // large-scale temperature anomaly
  kMoist,         // moisture anomaly
  kPress,         // synoptic pressure anomaly
  kOrog,          // orography (one per seed: the same planet in every sample)
  kWindNoise,     // ageostrophic wind
  kRain,          // small-scale precipitation
  kWindU,         // geostrophic wind from kPress, east component
  kWindV,         // geostrophic wind from kPress, north component
  kLatents
};
constexpr int kProfiles = 3;
constexpr int kFields = kLatents - kProfiles;

// Octaves of smooth noise for the random latents: number of octaves (each doubles the
// lattice), base lattice over the globe, amplitude ratio between octaves.
struct NoiseSpec {
  int latent;
  int octaves;
  int64_t cells_y, cells_x;
  double persistence;
};
constexpr NoiseSpec kNoiseSpecs[] = {{kTemp, 3, 4, 8, 0.5},        {kMoist, 4, 6, 12, 0.6},
                                     {kPress, 3, 6, 12, 0.5},      {kOrog, 4, 8, 16, 0.6},
                                     {kWindNoise, 3, 12, 24, 0.6}, {kRain, 3, 16, 32, 0.7}};

// How each channel's Gaussian "g" mixes the latents (weights on unit-variance latents; g is
// standardised afterwards, so only their ratios matter). The correlations follow the physics
// loosely: moisture and heights follow temperature, surface temperature drops over mountains,
// winds are geostrophic from the pressure anomaly, precipitation needs moisture and low pressure.
// PS has no row: it is built from PSL and the orography (Z1000) after their transforms.
struct Term {
  int latent;
  double weight;
};
struct Recipe {
  Term terms[4];
};
constexpr Recipe kRecipes[kChannels] = {
    /* TMQ    */ {{{kProfWarm, 0.80}, {kTemp, 0.30}, {kMoist, 0.50}, {0, 0}}},
    /* U850   */ {{{kProfJet, 0.55}, {kWindU, 0.65}, {kWindNoise, 0.30}, {0, 0}}},
    /* V850   */ {{{kWindV, 0.85}, {kWindNoise, 0.35}, {0, 0}, {0, 0}}},
    /* UBOT   */ {{{kProfJet, 0.50}, {kWindU, 0.55}, {kWindNoise, 0.45}, {0, 0}}},
    /* VBOT   */ {{{kWindV, 0.75}, {kWindNoise, 0.50}, {0, 0}, {0, 0}}},
    /* QREFHT */ {{{kProfWarm, 0.80}, {kTemp, 0.30}, {kMoist, 0.45}, {kOrog, -0.15}}},
    /* PS     */ {{{0, 0}, {0, 0}, {0, 0}, {0, 0}}},
    /* PSL    */ {{{kProfPressure, 0.45}, {kPress, 0.90}, {0, 0}, {0, 0}}},
    /* T200   */ {{{kProfWarm, 0.35}, {kTemp, 0.90}, {0, 0}, {0, 0}}},
    /* T500   */ {{{kProfWarm, 0.85}, {kTemp, 0.50}, {0, 0}, {0, 0}}},
    /* PRECT  */ {{{kProfWarm, 0.35}, {kMoist, 0.55}, {kRain, 0.60}, {kPress, -0.30}}},
    /* TS     */ {{{kProfWarm, 0.85}, {kTemp, 0.35}, {kOrog, -0.35}, {0, 0}}},
    /* TREFHT */ {{{kProfWarm, 0.85}, {kTemp, 0.35}, {kOrog, -0.35}, {0, 0}}},
    /* Z1000  */ {{{kOrog, 1.0}, {0, 0}, {0, 0}, {0, 0}}},
    /* Z200   */ {{{kProfWarm, 0.80}, {kTemp, 0.55}, {0, 0}, {0, 0}}},
    /* ZBOT   */ {{{kProfWarm, 0.60}, {kTemp, 0.70}, {0, 0}, {0, 0}}},
};

// Channels that are positive and right-skewed (moisture, rain, terrain height) get a log-normal
// transform whose shape comes from their coefficient of variation above the minimum.
constexpr bool kSkewed[kChannels] = {true,  false, false, false, false, true, false, false,
                                     false, false, true,  false, false, true, false, false};

// PS = a * PSL - b * orography in standardised units: surface pressure is sea-level pressure
// minus the column below the ground, so its spread is mostly terrain (std 9026 Pa vs ~1200).
constexpr double kPsTerrainWeight = 0.97;

// Stream ids.
constexpr uint64_t kStreamFeatures = 0x300;
constexpr uint64_t kStreamNoise = 0x310;  // + latent
constexpr uint64_t kStreamOrography = 0x320;

// Feature sizes in pixels at the full 768 x 1152 grid; other grids scale them by
// sqrt(H W / (768 * 1152)), with floors so small test grids still resolve every feature: at
// 32 x 48 (scale 0.042) a river would otherwise be a 3-pixel line 8-19 pixels long and a cyclone
// 2 pixels across, below what the network's stride-4 decoder features can place, and a trained
// network's validation IoU stayed near 0.74. The floors change nothing at full size.
constexpr double kFullPixels = 768.0 * 1152.0;
constexpr double kCycloneRadiusMin = 8, kCycloneRadiusSpan = 12;  // r = 8 + 12 u^2
constexpr double kCycloneRadiusFloor = 3.0;
constexpr double kCycloneLatMin = 8, kCycloneLatMax = 30;
constexpr double kRiverLengthMin = 200, kRiverLengthMax = 450;
constexpr double kRiverLengthFloor = 16.0;
constexpr double kRiverWidthMin = 10, kRiverWidthMax = 30;
constexpr double kRiverWidthFloor = 5.0;
constexpr double kRiverLatMin = 15, kRiverLatMax = 30, kRiverLatLimit = 65;
constexpr double kRiverTaperMean = 0.7628;  // mean of sqrt(sin(pi t)) over [0, 1]
constexpr int64_t kMaxFeatures = 64;
// Mean features per sample, at least: the real class frequencies give a full-size sample 2.4
// rivers and 0.76 cyclones on average, a 32 x 48 one 0.3 and 0.03, so most small samples would
// hold no feature at all. The IoU scores a class absent from label and prediction 1, so on such
// samples a network that predicts only background scored 0.83 (above the 0.82 target) at 32 x 48.
// With these minimums it scores about 0.7 there, and reaching the target takes finding the
// features; grids from about 96 x 144 (rivers) and 192 x 288 (cyclones) up are unchanged.
constexpr double kMinRiversPerSample = 1.0, kMinCyclonesPerSample = 0.4;

double lat_of_row(double row, int64_t h) {
  return 90.0 - (row + 0.5) * 180.0 / static_cast<double>(h);
}
double row_of_lat(double lat, int64_t h) {
  return (90.0 - lat) / 180.0 * static_cast<double>(h) - 0.5;
}

void check_inputs(const DeepcamSampleSpec& spec, const DeepcamChannelStats& stats) {
  if (spec.channels != kChannels)
    throw_usage("synthetic DeepCAM needs 16 channels (the named climate variables), got " +
                std::to_string(spec.channels));
  if (spec.height < 16 || spec.width < 16 || spec.height > 16384 || spec.width > 16384)
    throw_usage("synthetic DeepCAM height and width must be in [16, 16384], got " +
                std::to_string(spec.height) + " x " + std::to_string(spec.width));
  const auto n = static_cast<size_t>(kChannels);
  if (stats.minval.size() != n || stats.maxval.size() != n || stats.mean.size() != n ||
      stats.std.size() != n)
    throw_usage("DeepCAM channel statistics must have 16 values in minval, maxval, mean and std");
  for (size_t c = 0; c < n; ++c) {
    const bool ok = std::isfinite(stats.minval[c]) && std::isfinite(stats.maxval[c]) &&
                    std::isfinite(stats.mean[c]) && std::isfinite(stats.std[c]) &&
                    stats.minval[c] <= stats.maxval[c] && stats.std[c] >= 0;
    if (!ok)
      throw_usage(std::string("DeepCAM channel statistics for ") + kDeepcamChannelNames[c] +
                  " must be finite with minval <= maxval and std >= 0");
  }
}

// Mean and std of each selected channel of an [h, w, 16] array, deterministically: per-row
// partial sums in parallel, then a sequential sum over rows, so the result does not depend on
// how rows were split among threads.
struct Moments {
  double mean[kChannels] = {};
  double std[kChannels] = {};
};
Moments channel_moments(const float* data, int64_t h, int64_t w, const bool* which) {
  std::vector<double> part(static_cast<size_t>(h * kChannels * 2), 0.0);
#pragma omp parallel for schedule(static) if (synthetic::worth_parallel(h * w))
  for (int64_t y = 0; y < h; ++y) {
    double* s = &part[static_cast<size_t>(y * kChannels * 2)];
    const float* row = data + y * w * kChannels;
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < kChannels; ++c) {
        if (!which[c]) continue;
        const double v = row[x * kChannels + c];
        s[2 * c] += v;
        s[2 * c + 1] += v * v;
      }
  }
  Moments m;
  const double n = static_cast<double>(h * w);
  for (int c = 0; c < kChannels; ++c) {
    double sum = 0, sq = 0;
    for (int64_t y = 0; y < h; ++y) {
      sum += part[static_cast<size_t>((y * kChannels + c) * 2)];
      sq += part[static_cast<size_t>((y * kChannels + c) * 2 + 1)];
    }
    m.mean[c] = sum / n;
    m.std[c] = std::sqrt(std::max(0.0, sq / n - m.mean[c] * m.mean[c]));
  }
  return m;
}

// The s for which exp(s z) has coefficient of variation target_cv, z = (g - mean) / sd of
// channel c. Only a Gaussian z gives the closed form sqrt(log(1 + cv^2)); ours mixes latitude
// profiles and is lighter-tailed, so s is found by bisection (cv grows with s) on a fixed
// subsample of pixels, sequentially, so the result is the same for any thread count.
double fit_skew(const float* data, int64_t pixels, int c, double mean, double sd,
                double target_cv) {
  // A few thousand pixels pin s for the smooth fields; PRECT's heavy tail (cv 5) needs more to
  // see its peaks, so large grids keep every 64th pixel. Without the cap at 4096 on small grids
  // the fit was the largest cost of a sample.
  const int64_t stride = std::clamp<int64_t>(pixels / 4096, 1, 64);
  std::vector<double> z;
  for (int64_t i = 0; i < pixels; i += stride) z.push_back((data[i * kChannels + c] - mean) / sd);
  auto cv_of = [&z](double s) {
    double sum = 0, sq = 0;
    for (double v : z) {
      const double e = std::exp(s * v);
      sum += e;
      sq += e * e;
    }
    const double m = sum / static_cast<double>(z.size());
    return std::sqrt(std::max(0.0, sq / static_cast<double>(z.size()) - m * m)) / m;
  };
  double lo = 0, hi = 6;
  if (cv_of(hi) <= target_cv) return hi;
  for (int it = 0; it < 16; ++it) {  // 6 / 2^16: far below the subsample's own error
    const double mid = 0.5 * (lo + hi);
    (cv_of(mid) < target_cv ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Unit-variance smooth noise: the octaves of one latent, finer ones weaker, skipping octaves
// whose cells would be smaller than 4 pixels (they add nothing the grid can show).
std::vector<float> smooth_noise(const NoiseSpec& ns, int64_t h, int64_t w, uint64_t key) {
  std::vector<float> f(static_cast<size_t>(h * w), 0.0f);
  double amp = 1, total = 0;
  std::vector<std::pair<int, double>> used;
  for (int o = 0; o < ns.octaves; ++o, amp *= ns.persistence) {
    const int64_t cy = ns.cells_y << o, cx = ns.cells_x << o;
    if (o > 0 && (cy * 4 > h || cx * 4 > w)) break;
    used.push_back({o, amp});
    total += amp * amp;
  }
  const double norm = 1.0 / std::sqrt(total);
  for (const auto& [o, a] : used)
    synthetic::add_smooth_noise_2d(f.data(), h, w, ns.cells_y << o, ns.cells_x << o,
                                   rng::splitmix64_mix(key + static_cast<uint64_t>(o)), a * norm);
  return f;
}

// Geostrophic wind from the pressure anomaly: u ~ -dp/dy / f, v ~ dp/dx / f. The Coriolis sign
// flips at the equator (tanh keeps it smooth there), so flow circles lows anticlockwise in the
// north and clockwise in the south. Each component is standardised.
void geostrophic_wind(const float* p, int64_t h, int64_t w, float* u, float* v) {
  const bool par = synthetic::worth_parallel(h * w);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t y = 0; y < h; ++y) {
    const double coriolis = std::tanh(lat_of_row(static_cast<double>(y), h) / 10.0);
    const int64_t yn = std::max<int64_t>(y - 1, 0), ys = std::min<int64_t>(y + 1, h - 1);
    const double dy = static_cast<double>(ys - yn);
    for (int64_t x = 0; x < w; ++x) {
      const int64_t xw = (x + w - 1) % w, xe = (x + 1) % w;
      // Rows grow southward, so d/dy_north = (north - south) / dy.
      const double dp_dnorth = (p[yn * w + x] - p[ys * w + x]) / dy;
      const double dp_deast = (p[y * w + xe] - p[y * w + xw]) / 2.0;
      u[y * w + x] = static_cast<float>(-coriolis * dp_dnorth);
      v[y * w + x] = static_cast<float>(coriolis * dp_deast);
    }
  }
  for (float* f : {u, v}) {
    double sum = 0, sq = 0;
    std::vector<double> part(static_cast<size_t>(2 * h), 0.0);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        part[static_cast<size_t>(2 * y)] += f[y * w + x];
        part[static_cast<size_t>(2 * y + 1)] += static_cast<double>(f[y * w + x]) * f[y * w + x];
      }
    for (int64_t y = 0; y < h; ++y) {
      sum += part[static_cast<size_t>(2 * y)];
      sq += part[static_cast<size_t>(2 * y + 1)];
    }
    const double n = static_cast<double>(h * w), mean = sum / n;
    const double sd = std::sqrt(std::max(sq / n - mean * mean, 1e-30));
#pragma omp parallel for schedule(static) if (par)
    for (int64_t i = 0; i < h * w; ++i) f[i] = static_cast<float>((f[i] - mean) / sd);
  }
}

// Draws the feature counts and geometry sequentially from one stream: counter blocks of 64 per
// feature keep every parameter's draw fixed however many features come before it.
class FeatureDraws {
 public:
  explicit FeatureDraws(uint64_t key) : key_(key) {}
  double uniform(uint64_t block, uint64_t slot, double lo, double hi) const {
    return synthetic::uniform_in(key_, block * 64 + slot, lo, hi);
  }
  int64_t poisson(uint64_t block, double mean) const {
    return std::min<int64_t>(synthetic::poisson(key_, block * 64, mean), kMaxFeatures);
  }

 private:
  uint64_t key_;
};

// The per-pixel state of the river painting: normalised distance to the nearest river centre
// line (distance over local half width), which river, and the river's direction there.
struct RiverMap {
  std::vector<float> nd, east, north;
  std::vector<int16_t> owner;
};

struct River {
  double dq, jet, rain, dqref;
};

struct Cyclone {
  double row, col, radius, hemisphere, dp, dq, vmax, warm, rain, dqref;
};

// Mean label area of one feature, by midpoint quadrature over its size distribution (floors
// included), so the expected counts give the target class frequency on any grid.
double mean_cyclone_area(double scale) {
  constexpr int kSteps = 256;
  double sum = 0;
  for (int i = 0; i < kSteps; ++i) {
    const double u = (i + 0.5) / kSteps;
    const double r =
        std::max(kCycloneRadiusFloor, scale * (kCycloneRadiusMin + kCycloneRadiusSpan * u * u));
    sum += kPi * r * r;
  }
  return sum / kSteps;
}
double mean_river_area(double scale) {
  constexpr int kSteps = 256;
  double width = 0, length = 0;  // independent draws: the mean area is their means' product
  for (int i = 0; i < kSteps; ++i) {
    const double u = (i + 0.5) / kSteps;
    width += std::max(kRiverWidthFloor,
                      scale * (kRiverWidthMin + u * (kRiverWidthMax - kRiverWidthMin)));
    length += std::max(kRiverLengthFloor,
                       scale * (kRiverLengthMin + u * (kRiverLengthMax - kRiverLengthMin)));
  }
  return length / kSteps * width / kSteps * kRiverTaperMean;
}

// Sharp-edged bump: 1 at the centre line, ~0.42 at the label edge (nd = 1), falling smoothly
// to exactly 0 at nd = reach. The (1 - u^2)^2 window matters: a bare 1/(1 + nd^4) cut off at
// the reach leaves a visible step where the background is near zero (rain on a log scale).
constexpr double kBumpReach = 3.5;
constexpr double kCycloneReach = 5.5;  // in core radii: the pressure dip is the widest part
inline double window(double nd, double reach) {
  const double u = nd / reach;
  return u < 1 ? (1 - u * u) * (1 - u * u) : 0.0;
}
inline double bump(double nd, double reach = kBumpReach) {
  const double n2 = nd * nd;
  return window(nd, reach) / (1.0 + n2 * n2);
}

// Paints one river into the map: a quadratic Bezier curve from the subtropics poleward and
// eastward, its width tapering to zero at both ends. Discs are stamped along the curve, each
// pixel keeping the smallest normalised distance.
void paint_river(const FeatureDraws& draws, uint64_t block, int16_t id, int64_t h, int64_t w,
                 double scale, RiverMap& map) {
  const double hemisphere = draws.uniform(block, 0, 0, 1) < 0.5 ? 1.0 : -1.0;
  const double lat0 = draws.uniform(block, 1, kRiverLatMin, kRiverLatMax);
  const double col0 = draws.uniform(block, 2, 0, static_cast<double>(w));
  const double length = std::max(kRiverLengthFloor,
                                 scale * draws.uniform(block, 3, kRiverLengthMin, kRiverLengthMax));
  const double width =
      std::max(kRiverWidthFloor, scale * draws.uniform(block, 4, kRiverWidthMin, kRiverWidthMax));
  double sin_t = std::sin(draws.uniform(block, 5, 10, 35) * kPi / 180);
  const double bend = draws.uniform(block, 6, -0.3, 0.3);
  // Keep the poleward end below kRiverLatLimit so no river leaves the grid at the top or bottom.
  const double rows_free = (kRiverLatLimit - lat0) / 180.0 * static_cast<double>(h);
  sin_t = std::min(sin_t, rows_free / length);
  const double cos_t = std::sqrt(1 - sin_t * sin_t);
  // (row, col) coordinates; poleward is up (-row) in the north, down in the south.
  const double r0 = row_of_lat(hemisphere * lat0, h), c0 = col0;
  const double dr = -hemisphere * sin_t, dc = cos_t;
  const double r2 = r0 + length * dr, c2 = c0 + length * dc;
  const double r1 = 0.5 * (r0 + r2) + bend * length * dc, c1 = 0.5 * (c0 + c2) - bend * length * dr;
  // Stamps closer than a sixth of the half width leave no visible scallops on the edge.
  const double step = std::clamp(width / 12.0, 0.25, 1.0);
  const auto points = static_cast<int64_t>(std::ceil(1.3 * length / step)) + 1;
  for (int64_t k = 0; k < points; ++k) {
    const double t = static_cast<double>(k) / static_cast<double>(points - 1);
    const double half = 0.5 * width * std::sqrt(std::sin(kPi * t));
    if (half < 0.05) continue;
    const double pr = (1 - t) * (1 - t) * r0 + 2 * (1 - t) * t * r1 + t * t * r2;
    const double pc = (1 - t) * (1 - t) * c0 + 2 * (1 - t) * t * c1 + t * t * c2;
    // Direction of travel in (east, north) components.
    const double tr = 2 * (1 - t) * (r1 - r0) + 2 * t * (r2 - r1);
    const double tc = 2 * (1 - t) * (c1 - c0) + 2 * t * (c2 - c1);
    const double tn = std::hypot(tr, tc);
    const auto east = static_cast<float>(tc / tn), north = static_cast<float>(-tr / tn);
    const double ext = kBumpReach * half;
    const auto y_lo = std::max<int64_t>(0, static_cast<int64_t>(std::floor(pr - ext)));
    const auto y_hi = std::min<int64_t>(h - 1, static_cast<int64_t>(std::ceil(pr + ext)));
    const auto x_lo = static_cast<int64_t>(std::floor(pc - ext));
    const auto x_hi = std::min(static_cast<int64_t>(std::ceil(pc + ext)), x_lo + w - 1);
    for (int64_t y = y_lo; y <= y_hi; ++y)
      for (int64_t xu = x_lo; xu <= x_hi; ++xu) {
        const double dy = static_cast<double>(y) - pr, dx = static_cast<double>(xu) - pc;
        const double d2 = dy * dy + dx * dx;
        if (d2 > ext * ext) continue;
        const auto nd = static_cast<float>(std::sqrt(d2) / half);
        const int64_t x = ((xu % w) + w) % w;  // longitude wraps
        const auto i = static_cast<size_t>(y * w + x);
        if (nd < map.nd[i]) {
          map.nd[i] = nd;
          map.owner[i] = id;
          map.east[i] = east;
          map.north[i] = north;
        }
      }
  }
}

}  // namespace

DeepcamChannelStats default_deepcam_channel_stats() {
  // From /work/shared/reference/deepcam_stats.h5 (group climate, count 121266), read with the
  // HDF5 C API; std = sqrt(sqmean - mean^2). For PSL that difference is negative in the file
  // (float32 cancellation: sqmean 1.01535e10 < mean^2 1.01570e10), so PSL's std is a
  // climatological 1200 Pa instead.
  DeepcamChannelStats s;
  s.minval = {0.0261445921f, -88.3379898f,    -84.6209412f,     -78.5636673f,
              -77.7221756f,  7.33015558e-12f, 48330.793f,       87595.4297f,
              183.576385f,   208.38266f,      -7.18595786e-19f, 109.642708f,
              94.1940308f,   -0.375844389f,   9952.04102f,      20.3625793f};
  s.maxval = {108.997238f, 85.8568802f, 89.3712845f, 76.7598267f, 80.5320053f,     0.145638943f,
              107250.219f, 112039.352f, 248.286392f, 286.01358f,  3.73487928e-05f, 352.618683f,
              331.796539f, 5726.14014f, 12905.2363f, 71.6775284f};
  s.mean = {18.6588554f, 1.56981421f, 0.212559104f, 0.116417967f, 0.211530685f,    0.00757488329f,
            96592.6719f, 100781.945f, 213.032532f,  252.274124f,  3.00335614e-08f, 278.530273f,
            278.101135f, 474.538879f, 11699.3438f,  61.1453857f};
  s.std = {15.8849281f, 8.27738896f, 6.21576193f, 6.62960199f, 5.74918569f,     0.00627428759f,
           9026.09883f, 1200.0f,     13.5544256f, 18.5200661f, 1.57163667e-07f, 19.0181878f,
           19.2982547f, 829.647652f, 867.287622f, 5.17400878f};
  return s;
}

void generate_deepcam_sample(uint64_t seed, int64_t index, const DeepcamSampleSpec& spec,
                             const DeepcamChannelStats& stats, float* data, float* labels) {
  check_inputs(spec, stats);
  if (index < 0) throw_usage("synthetic DeepCAM sample index must be >= 0");
  CREST_CHECK(data != nullptr && labels != nullptr, "deepcam sample buffers");
  const int64_t h = spec.height, w = spec.width, pixels = h * w;
  constexpr int C = kChannels;
  const bool par = synthetic::worth_parallel(pixels);

  // --- Latents. -----------------------------------------------------------------------------
  std::vector<double> profiles(static_cast<size_t>(kProfiles * h));
  for (int k = 0; k < kProfiles; ++k) {
    double* p = &profiles[static_cast<size_t>(k * h)];
    double sum = 0, sq = 0;
    for (int64_t y = 0; y < h; ++y) {
      const double lat = lat_of_row(static_cast<double>(y), h) * kPi / 180;
      p[y] = k == kProfWarm       ? std::cos(lat)
             : k == kProfPressure ? -std::cos(6 * lat)
                                  : -std::cos(4 * lat);
      sum += p[y];
      sq += p[y] * p[y];
    }
    const double mean = sum / static_cast<double>(h);
    const double sd = std::sqrt(std::max(sq / static_cast<double>(h) - mean * mean, 1e-30));
    for (int64_t y = 0; y < h; ++y) p[y] = (p[y] - mean) / sd;
  }
  std::vector<std::vector<float>> fields(static_cast<size_t>(kFields));
  for (const NoiseSpec& ns : kNoiseSpecs) {
    const uint64_t key =
        ns.latent == kOrog
            ? synthetic::stream_key(seed, 0, kStreamOrography)
            : synthetic::stream_key(seed, index, kStreamNoise + static_cast<uint64_t>(ns.latent));
    fields[static_cast<size_t>(ns.latent - kProfiles)] = smooth_noise(ns, h, w, key);
  }
  fields[kWindU - kProfiles].resize(static_cast<size_t>(pixels));
  fields[kWindV - kProfiles].resize(static_cast<size_t>(pixels));
  geostrophic_wind(fields[kPress - kProfiles].data(), h, w, fields[kWindU - kProfiles].data(),
                   fields[kWindV - kProfiles].data());

  // --- Background: mix, standardise, skew, scale to the statistics. -----------------------
  // Pass 1: g = mix of latents per channel.
#pragma omp parallel for schedule(static) if (par)
  for (int64_t y = 0; y < h; ++y) {
    double lat[kLatents];
    for (int k = 0; k < kProfiles; ++k) lat[k] = profiles[static_cast<size_t>(k * h + y)];
    for (int64_t x = 0; x < w; ++x) {
      const int64_t i = y * w + x;
      for (int k = kProfiles; k < kLatents; ++k)
        lat[k] = fields[static_cast<size_t>(k - kProfiles)][static_cast<size_t>(i)];
      float* px = data + i * C;
      for (int c = 0; c < C; ++c) {
        double g = 0;
        for (const Term& t : kRecipes[c].terms) g += t.weight * lat[t.latent];
        px[c] = static_cast<float>(g);
      }
    }
  }
  bool mixed[C];
  for (int c = 0; c < C; ++c) mixed[c] = c != kPS;
  const Moments gm = channel_moments(data, h, w, mixed);

  // Pass 2: z = standardised g; skewed channels store exp(s z), with s fitted so that the
  // sample's coefficient of variation above the minimum matches the statistics'.
  double skew[C] = {};
  for (int c = 0; c < C; ++c) {
    const auto cs = static_cast<size_t>(c);
    const double above = static_cast<double>(stats.mean[cs]) - stats.minval[cs];
    if (kSkewed[c] && above > 0 && stats.std[cs] > 0 && gm.std[c] > 0)
      skew[c] = fit_skew(data, pixels, c, gm.mean[c], gm.std[c], stats.std[cs] / above);
  }
#pragma omp parallel for schedule(static) if (par)
  for (int64_t i = 0; i < pixels; ++i) {
    float* px = data + i * C;
    for (int c = 0; c < C; ++c) {
      if (!mixed[c]) continue;
      const double z = gm.std[c] > 0 ? (px[c] - gm.mean[c]) / gm.std[c] : 0.0;
      px[c] = static_cast<float>(skew[c] > 0 ? std::exp(skew[c] * z) : z);
    }
  }
  bool skewed[C];
  for (int c = 0; c < C; ++c) skewed[c] = skew[c] > 0;
  const Moments em = channel_moments(data, h, w, skewed);  // exp(s z) > 0, so mean(e) > 0

  // Pass 3: physical values with the exact per-sample mean before features. Symmetric
  // channels are mean + std * z (exact std too). Skewed ones are min + (mean - min) * e / mean(e),
  // which never goes below the minimum; their std matches only in expectation, as a sample's
  // log-normal tail decides its own spread.
  const double ps_a = std::sqrt(1 - kPsTerrainWeight * kPsTerrainWeight);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t i = 0; i < pixels; ++i) {
    float* px = data + i * C;
    double z[C];
    for (int c = 0; c < C; ++c) {
      const auto cs = static_cast<size_t>(c);
      if (!skewed[c]) {
        z[c] = px[c];
        px[c] = static_cast<float>(stats.mean[cs] + stats.std[cs] * z[c]);
      } else {
        const double ratio = px[c] / em.mean[c];
        z[c] = (ratio - 1) * (stats.mean[cs] - stats.minval[cs]) / stats.std[cs];
        px[c] = static_cast<float>(stats.minval[cs] + (stats.mean[cs] - stats.minval[cs]) * ratio);
      }
    }
    // The terrain enters PS in standardised units; z of a skewed channel is its value's.
    const double z_ps = ps_a * z[kPSL] - kPsTerrainWeight * z[kZ1000];
    px[kPS] = static_cast<float>(stats.mean[kPS] + stats.std[kPS] * z_ps);
    labels[i] = 0.0f;
  }

  // --- Features. ----------------------------------------------------------------------------
  // Perturbation amplitudes are in units of a channel's std, so they keep their physical size
  // under the default statistics (noted per line) and stay proportionate under any others.
  auto sd = [&stats](int c) { return static_cast<double>(stats.std[static_cast<size_t>(c)]); };
  const double scale = std::sqrt(static_cast<double>(pixels) / kFullPixels);
  const FeatureDraws draws(synthetic::stream_key(seed, index, kStreamFeatures));
  const double cyclone_rate =
      std::max(kMinCyclonesPerSample, kDeepcamClassFrequencies[1] * static_cast<double>(pixels) /
                                          mean_cyclone_area(scale));
  const double river_rate =
      std::max(kMinRiversPerSample,
               kDeepcamClassFrequencies[2] * static_cast<double>(pixels) / mean_river_area(scale));
  const int64_t n_rivers = draws.poisson(0, river_rate);
  const int64_t n_cyclones = draws.poisson(1, cyclone_rate);

  if (n_rivers > 0) {
    RiverMap map;
    map.nd.assign(static_cast<size_t>(pixels), std::numeric_limits<float>::infinity());
    map.owner.assign(static_cast<size_t>(pixels), -1);
    map.east.assign(static_cast<size_t>(pixels), 0.0f);
    map.north.assign(static_cast<size_t>(pixels), 0.0f);
    std::vector<River> rivers(static_cast<size_t>(n_rivers));
    for (int64_t r = 0; r < n_rivers; ++r) {
      const uint64_t block = 2 + static_cast<uint64_t>(r);
      paint_river(draws, block, static_cast<int16_t>(r), h, w, scale, map);
      rivers[static_cast<size_t>(r)] = {
          draws.uniform(block, 10, 2.0, 3.0) * sd(kTMQ),      // 32-48 kg/m^2 of water vapour
          draws.uniform(block, 11, 2.5, 3.5) * sd(kU850),     // 21-29 m/s low-level jet
          draws.uniform(block, 12, 4, 10) * sd(kPRECT),       // 0.6-1.6 um/s (2.3-5.7 mm/h) rain
          draws.uniform(block, 13, 0.8, 1.2) * sd(kQREFHT)};  // 5-7.5 g/kg near-surface humidity
    }
#pragma omp parallel for schedule(static) if (par)
    for (int64_t i = 0; i < pixels; ++i) {
      const double nd = map.nd[static_cast<size_t>(i)];
      if (!(nd < kBumpReach)) continue;
      const River& rv = rivers[static_cast<size_t>(map.owner[static_cast<size_t>(i)])];
      const double b = bump(nd);
      const double ue = rv.jet * b * map.east[static_cast<size_t>(i)];
      const double vn = rv.jet * b * map.north[static_cast<size_t>(i)];
      float* px = data + i * C;
      px[kTMQ] += static_cast<float>(rv.dq * b);
      px[kQREFHT] += static_cast<float>(rv.dqref * b);
      px[kPRECT] += static_cast<float>(rv.rain * b);
      px[kU850] += static_cast<float>(ue);
      px[kV850] += static_cast<float>(vn);
      px[kUBOT] += static_cast<float>(0.6 * ue);
      px[kVBOT] += static_cast<float>(0.6 * vn);
      if (nd < 1) labels[i] = 2.0f;
    }
  }

  for (int64_t k = 0; k < n_cyclones; ++k) {
    const uint64_t block = 2 + kMaxFeatures + static_cast<uint64_t>(k);
    Cyclone cy;
    cy.hemisphere = draws.uniform(block, 0, 0, 1) < 0.5 ? 1.0 : -1.0;
    cy.row = row_of_lat(cy.hemisphere * draws.uniform(block, 1, kCycloneLatMin, kCycloneLatMax), h);
    cy.col = draws.uniform(block, 2, 0, static_cast<double>(w));
    const double u = draws.uniform(block, 3, 0, 1);
    cy.radius =
        std::max(kCycloneRadiusFloor, scale * (kCycloneRadiusMin + kCycloneRadiusSpan * u * u));
    cy.dp = draws.uniform(block, 4, 1.5, 4.5) * sd(kPSL);        // 1800-5400 Pa central deficit
    cy.dq = draws.uniform(block, 5, 1.0, 2.0) * sd(kTMQ);        // 16-32 kg/m^2 moist core
    cy.vmax = draws.uniform(block, 6, 2.5, 5.5) * sd(kU850);     // 21-46 m/s peak wind
    cy.warm = draws.uniform(block, 7, 0.15, 0.4) * sd(kT500);    // 3-7 K warm core aloft
    cy.rain = draws.uniform(block, 8, 15, 45) * sd(kPRECT);      // 2.4-7 um/s (8-25 mm/h)
    cy.dqref = draws.uniform(block, 9, 0.5, 1.0) * sd(kQREFHT);  // 3-6 g/kg
    // Pressure is broader than the labelled core (Gaussian, sigma 1.5 r); winds peak inside it
    // at 0.6 r (the eyewall) and fade by 2 r; moisture and rain follow the core's sharp bump.
    const double ext = kCycloneReach * cy.radius + 1;
    const auto y_lo = std::max<int64_t>(0, static_cast<int64_t>(std::floor(cy.row - ext)));
    const auto y_hi = std::min<int64_t>(h - 1, static_cast<int64_t>(std::ceil(cy.row + ext)));
    const auto x_lo = static_cast<int64_t>(std::floor(cy.col - ext));
    const auto x_hi = std::min(static_cast<int64_t>(std::ceil(cy.col + ext)), x_lo + w - 1);
    // Sequential: even the largest vortex box (~220^2 pixels at full size) is too small to
    // share.
    for (int64_t y = y_lo; y <= y_hi; ++y)
      for (int64_t xu = x_lo; xu <= x_hi; ++xu) {
        const double de = static_cast<double>(xu) - cy.col;
        const double dn = cy.row - static_cast<double>(y);
        const double d = std::sqrt(de * de + dn * dn), rho = d / cy.radius;
        if (rho >= kCycloneReach) continue;
        const int64_t x = ((xu % w) + w) % w;
        const int64_t i = y * w + x;
        float* px = data + i * C;
        const double dp =
            cy.dp * std::exp(-rho * rho / (2 * 1.5 * 1.5)) * window(rho, kCycloneReach);
        const double b = bump(rho);
        const double q = rho / 0.6;
        const double speed = cy.vmax * q * std::exp(0.5 * (1 - q * q));
        // Anticlockwise in the north: east of the centre the wind blows north.
        const double ue = d > 0 ? -cy.hemisphere * speed * dn / d : 0.0;
        const double vn = d > 0 ? cy.hemisphere * speed * de / d : 0.0;
        px[kPSL] -= static_cast<float>(dp);
        px[kPS] -= static_cast<float>(dp);
        px[kTMQ] += static_cast<float>(cy.dq * b);
        px[kQREFHT] += static_cast<float>(cy.dqref * b);
        px[kPRECT] += static_cast<float>(cy.rain * b);
        px[kT500] += static_cast<float>(cy.warm * b);
        px[kT200] += static_cast<float>(0.7 * cy.warm * b);
        px[kU850] += static_cast<float>(ue);
        px[kV850] += static_cast<float>(vn);
        px[kUBOT] += static_cast<float>(0.8 * ue);
        px[kVBOT] += static_cast<float>(0.8 * vn);
        if (rho < 1) labels[i] = 1.0f;
      }
  }

  // --- Clip to the value range the statistics allow. ---------------------------------------
#pragma omp parallel for schedule(static) if (par)
  for (int64_t i = 0; i < pixels; ++i) {
    float* px = data + i * C;
    for (int c = 0; c < C; ++c)
      px[c] = std::clamp(px[c], stats.minval[static_cast<size_t>(c)],
                         stats.maxval[static_cast<size_t>(c)]);
  }
}

}  // namespace crest
