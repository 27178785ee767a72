// The spatial decomposition's arithmetic (src/spatial/decomposition.cpp): block splits as
// numpy.array_split, the grid's numbering, and the halo plans of every part of an axis agreeing
// with each other — what one part sends is what its neighbour expects — for kernels, strides,
// dilations and paddings of every kind the models use, transposed windows included; and the
// refusals, with their message.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "crest/core/error.hpp"
#include "crest/graph/window_axis.hpp"
#include "crest/spatial/decomposition.hpp"

namespace crest {
namespace {

TEST(SpatialDecomposition, BlockRangesSplitAsNumpyArraySplit) {
  // numpy.array_split(range(33), 2) -> 17 + 16; (10, 4) -> 3, 3, 2, 2.
  EXPECT_EQ(block_range(33, 2, 0), (IndexRange{0, 17}));
  EXPECT_EQ(block_range(33, 2, 1), (IndexRange{17, 33}));
  const int64_t sizes[] = {3, 3, 2, 2};
  int64_t next = 0;
  for (int i = 0; i < 4; ++i) {
    const IndexRange r = block_range(10, 4, i);
    EXPECT_EQ(r.begin, next);
    EXPECT_EQ(r.size(), sizes[i]);
    next = r.end;
  }
  EXPECT_EQ(next, 10);
}

TEST(SpatialDecomposition, GridNumbersRanksRowMajorAsMpiCart) {
  const SpatialGrid g{{2, 3, 2}};
  EXPECT_EQ(g.size(), 12);
  EXPECT_EQ(g.coords(0), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(g.coords(1), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(g.coords(2), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(g.coords(11), (std::vector<int>{1, 2, 1}));
  for (int r = 0; r < g.size(); ++r) EXPECT_EQ(g.rank_of(g.coords(r)), r);
  EXPECT_EQ(g.neighbour(2, 1, +1), 4);
  EXPECT_EQ(g.neighbour(2, 0, +1), 8);
  EXPECT_EQ(g.neighbour(9, 2, -1), 8);
}

// Keras/TensorFlow 'same': output ceil(in / stride), the odd pixel of padding at the end.
WindowAxis same_axis(int64_t in, int64_t k, int64_t s, int64_t d) {
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + d * (k - 1) + 1 - in, 0);
  return {.in_extent = in,
          .out_extent = out,
          .kernel = k,
          .stride = s,
          .dilation = d,
          .pad_lo = total / 2};
}
WindowAxis valid_axis(int64_t in, int64_t k, int64_t s, int64_t d) {
  return {.in_extent = in,
          .out_extent = (in - d * (k - 1) - 1) / s + 1,
          .kernel = k,
          .stride = s,
          .dilation = d,
          .pad_lo = 0};
}

// Every part's window is what its output rows read; its own rows and the two neighbours' messages
// tile the window exactly; what part i sends up is what part i + 1 receives from below.
void expect_consistent_plans(const WindowAxis& w, int parts) {
  std::vector<AxisPlan> p;
  p.reserve(static_cast<size_t>(parts));
  for (int i = 0; i < parts; ++i) p.push_back(plan_axis(w, parts, i, "conv", "depth"));
  for (int i = 0; i < parts; ++i) {
    const IndexRange read = rows_read(w, p[i].owned_out);
    EXPECT_EQ(p[i].window.begin - p[i].pad_lo, read.begin);
    EXPECT_EQ(p[i].window.end + p[i].pad_hi, read.end);
    EXPECT_TRUE(p[i].pad_lo == 0 || i == 0) << "padding inside the volume";
    EXPECT_TRUE(p[i].pad_hi == 0 || i == parts - 1) << "padding inside the volume";
    const IndexRange own = intersect(p[i].owned_in, p[i].window);
    EXPECT_EQ(p[i].from_lower.size() + own.size() + p[i].from_upper.size(), p[i].window.size());
    if (i + 1 < parts) {
      EXPECT_EQ(p[i].to_upper, p[i + 1].from_lower);
      EXPECT_EQ(p[i + 1].to_lower, p[i].from_upper);
    }
  }
  EXPECT_EQ(p.front().owned_out.begin, 0);
  EXPECT_EQ(p.back().owned_out.end, w.out_extent);
}

// Whether every part of the axis can be planned; a refusal must name the key and the layer.
bool plannable(const WindowAxis& w, int parts) {
  try {
    for (int i = 0; i < parts; ++i) plan_axis(w, parts, i, "conv", "depth");
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dist.spatial: layer 'conv'"), std::string::npos)
        << e.what();
    return false;
  }
}

TEST(SpatialDecomposition, PlansOfNeighboursAgreeForEveryWindow) {
  int checked = 0, refused = 0;
  for (int64_t in : {16, 17, 33})
    for (int64_t k : {1, 2, 3, 5})
      for (int64_t s : {1, 2})
        for (int64_t d : {1, 2})
          for (int parts : {2, 3, 4})
            for (const WindowAxis& w : {same_axis(in, k, s, d), valid_axis(in, k, s, d)}) {
              SCOPED_TRACE("in " + std::to_string(in) + " k " + std::to_string(k) + " s " +
                           std::to_string(s) + " d " + std::to_string(d) + " parts " +
                           std::to_string(parts) + " pad_lo " + std::to_string(w.pad_lo));
              if (!plannable(w, parts)) {
                ++refused;
                continue;
              }
              expect_consistent_plans(w, parts);
              ++checked;
            }
  EXPECT_EQ(checked + refused, 3 * 4 * 2 * 2 * 3 * 2);
  // Only wide dilated windows on small parts are refused.
  EXPECT_GE(checked, 250) << refused << " refused";
}

// A transposed window (PyTorch's ConvTranspose: output (in - 1) * s - 2 p + d (k - 1) + 1 + op).
WindowAxis transposed_axis(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p, int64_t op) {
  return {.in_extent = in,
          .out_extent = (in - 1) * s - 2 * p + d * (k - 1) + 1 + op,
          .kernel = k,
          .stride = s,
          .dilation = d,
          .pad_lo = p,
          .transposed = true};
}

// Brute force over every input row and tap: the window holds every row that writes one of the
// part's output rows, and the local kernel (window rows from 0, the plan's padding) writes exactly
// the part's rows, at their place; the neighbours' messages tile the window.
void expect_transposed_plans(const WindowAxis& w, int parts) {
  for (int i = 0; i < parts; ++i) {
    const AxisPlan p = plan_axis(w, parts, i, "deconv", "height");
    const int64_t local_out =
        (p.window.size() - 1) * w.stride - p.pad_lo - p.pad_hi + (w.kernel - 1) * w.dilation + 1;
    EXPECT_EQ(local_out, p.owned_out.size());
    for (int64_t row = 0; row < w.in_extent; ++row)
      for (int64_t j = 0; j < w.kernel; ++j) {
        const int64_t o = row * w.stride - w.pad_lo + j * w.dilation;
        const bool mine = o >= p.owned_out.begin && o < p.owned_out.end;
        const bool in_window = row >= p.window.begin && row < p.window.end;
        if (mine) {
          EXPECT_TRUE(in_window) << "row " << row << " writes output " << o;
        }
        if (!in_window) continue;
        const int64_t local = (row - p.window.begin) * w.stride - p.pad_lo + j * w.dilation;
        EXPECT_EQ(local >= 0 && local < p.owned_out.size(), mine) << "row " << row << " tap " << j;
        if (mine) {
          EXPECT_EQ(local + p.owned_out.begin, o);
        }
      }
    const IndexRange own = intersect(p.owned_in, p.window);
    EXPECT_EQ(p.from_lower.size() + own.size() + p.from_upper.size(), p.window.size());
  }
}

TEST(SpatialDecomposition, TransposedWindowsReadTheRowsThatWriteTheirOutput) {
  int checked = 0;
  for (int64_t in : {8, 11, 24})
    for (const auto& [k, s, d, p, op] :
         {std::tuple{3, 2, 1, 1, 1}, std::tuple{3, 1, 1, 1, 0}, std::tuple{4, 2, 1, 1, 0},
          std::tuple{2, 2, 1, 0, 0}, std::tuple{5, 2, 1, 2, 1}, std::tuple{3, 3, 2, 1, 1}})
      for (int parts : {2, 3, 4}) {
        SCOPED_TRACE("in " + std::to_string(in) + " k " + std::to_string(k) + " s " +
                     std::to_string(s) + " parts " + std::to_string(parts));
        const WindowAxis w = transposed_axis(in, k, s, d, p, op);
        if (!plannable(w, parts)) continue;
        expect_transposed_plans(w, parts);
        ++checked;
      }
  EXPECT_GE(checked, 50);
}

// The input gradient from the output gradient's halo (conv_data_gradient.hpp): the reversed
// window's plan of each part, brute-forced over every output row and tap of the forward window,
// holds every output row that reads one of the part's input rows, and the data-gradient kernel
// (a convolution from the part's input rows to that window, the plan's padding) reads each of
// them where the whole convolution does. Refused only where the padding would be negative.
TEST(SpatialDecomposition, ReversedWindowsHoldTheOutputRowsReadingTheOwnedRows) {
  int checked = 0, refused = 0;
  for (int64_t in : {16, 17, 33})
    for (int64_t k : {1, 3, 5})
      for (int64_t s : {1, 2})
        for (int64_t d : {1, 2})
          for (int parts : {2, 3, 4})
            for (const WindowAxis& w : {same_axis(in, k, s, d), valid_axis(in, k, s, d)}) {
              if (!split_problem(w, parts).empty()) continue;  // the forward split is refused
              const WindowAxis r = reversed(w);
              if (const std::string why = split_problem(r, parts); !why.empty()) {
                EXPECT_NE(why.find("negative padding"), std::string::npos) << why;
                ++refused;
                continue;
              }
              ++checked;
              for (int i = 0; i < parts; ++i) {
                const AxisPlan p = plan_axis(r, parts, i, "conv", "depth");
                ASSERT_EQ(p.owned_out, block_range(w.in_extent, parts, i));
                const int64_t span = (w.kernel - 1) * w.dilation;
                const int64_t local_out =
                    (p.owned_out.size() + p.pad_lo + p.pad_hi - span - 1) / w.stride + 1;
                EXPECT_EQ(local_out, p.window.size()) << "part " << i;
                for (int64_t o = 0; o < w.out_extent; ++o)
                  for (int64_t j = 0; j < w.kernel; ++j) {
                    const int64_t x = o * w.stride - w.pad_lo + j * w.dilation;
                    const bool mine = x >= p.owned_out.begin && x < p.owned_out.end;
                    const bool in_window = o >= p.window.begin && o < p.window.end;
                    if (mine) {
                      EXPECT_TRUE(in_window) << "output " << o << " reads input " << x;
                    }
                    if (!in_window) continue;
                    const int64_t local =
                        (o - p.window.begin) * w.stride - p.pad_lo + j * w.dilation;
                    EXPECT_EQ(local + p.owned_out.begin, x) << "output " << o << " tap " << j;
                  }
              }
            }
  // Most are planned; the refused ones are strides above the span (1-wide stride-2 windows).
  EXPECT_GE(checked, 150) << refused << " refused";
  EXPECT_GE(refused, 1);
}

TEST(SpatialDecomposition, RefusesATransposedWindowThatWouldNeedNegativePadding) {
  // A 1-tap window with stride 2 writes every other output row: a part starting on a row no input
  // writes would need a negative padding, which the kernels do not take.
  const WindowAxis w = transposed_axis(8, 1, 2, 1, 0, 1);
  std::string m;
  try {
    for (int i = 0; i < 3; ++i) plan_axis(w, 3, i, "up", "width");
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("dist.spatial: layer 'up'"), std::string::npos) << m;
  EXPECT_NE(m.find("negative padding"), std::string::npos) << m;
}

TEST(SpatialDecomposition, ThreeByThreeSameSplitsIntoOneRowHalos) {
  const AxisPlan p = plan_axis(same_axis(33, 3, 1, 1), 2, 0, "conv1", "depth");
  EXPECT_EQ(p.owned_in, (IndexRange{0, 17}));
  EXPECT_EQ(p.window, (IndexRange{0, 18}));
  EXPECT_EQ(p.pad_lo, 1);
  EXPECT_EQ(p.pad_hi, 0);
  EXPECT_EQ(p.from_upper, (IndexRange{17, 18}));
  EXPECT_EQ(p.to_upper, (IndexRange{16, 17}));
  EXPECT_TRUE(p.from_lower.empty());
}

std::string refusal(const WindowAxis& w, int parts) {
  try {
    for (int i = 0; i < parts; ++i) plan_axis(w, parts, i, "conv4", "height");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  return "";
}

TEST(SpatialDecomposition, RefusesAHaloWiderThanANeighboursPart) {
  // 8 rows over 4 parts: 2 rows each; a dilated 5-tap window reaches 4 rows out.
  const std::string m = refusal(same_axis(8, 5, 1, 2), 4);
  EXPECT_NE(m.find("dist.spatial"), std::string::npos) << m;
  EXPECT_NE(m.find("'conv4'"), std::string::npos) << m;
  EXPECT_NE(m.find("height"), std::string::npos) << m;
  EXPECT_NE(m.find("input extent 8"), std::string::npos) << m;
  EXPECT_NE(m.find("wider than a neighbour's part"), std::string::npos) << m;
}

TEST(SpatialDecomposition, RefusesMorePartsThanRows) {
  // CosmoFlow's last pooled volume: 4 rows cannot feed 8 parts.
  const std::string m = refusal(valid_axis(4, 2, 2, 1), 8);
  EXPECT_NE(m.find("fewer rows than parts"), std::string::npos) << m;
  EXPECT_NE(m.find("output extent 2"), std::string::npos) << m;
}

}  // namespace
}  // namespace crest
