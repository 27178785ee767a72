// The spatial decomposition's arithmetic (src/spatial/decomposition.cpp): block splits as
// numpy.array_split, the grid's numbering, and the halo plans of every part of an axis agreeing
// with each other — what one part sends is what its neighbour expects — for kernels, strides,
// dilations and paddings of every kind the models use; and the refusals, with their message.
#include <gtest/gtest.h>

#include <algorithm>

#include "crest/core/error.hpp"
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
