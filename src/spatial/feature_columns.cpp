#include "crest/spatial/feature_columns.hpp"

#include <algorithm>
#include <cstring>

#include "crest/core/error.hpp"

namespace crest {
namespace {

constexpr int kGatherTag = 7310;   // the parts' messages to the group's first rank
constexpr int kScatterTag = 7311;  // and from it

int64_t count_of(const std::vector<ColumnRun>& runs) {
  int64_t n = 0;
  for (const ColumnRun& r : runs) n += r.count;
  return n;
}

class FeatureColumns final : public ParamShard {
 public:
  FeatureColumns(Communicator& group, Communicator* replicas,
                 std::vector<std::vector<ColumnRun>> runs, int64_t rows, int64_t columns)
      : group_(&group),
        replicas_(replicas),
        runs_(std::move(runs)),
        rows_(rows),
        columns_(columns) {
    for (const auto& r : runs_) widest_ = std::max(widest_, count_of(r));
  }
  Shape whole_shape() const override { return Shape{rows_, columns_}; }
  Shape part_shape() const override { return Shape{rows_, width(group_->rank())}; }
  int64_t reserved_count() const override { return rows_ * widest_; }
  void take_part(const void* whole, void* part, DType dtype) const override {
    copy_runs(group_->rank(), static_cast<const std::byte*>(whole), static_cast<std::byte*>(part),
              dtype, /*into_whole=*/false);
  }
  std::vector<std::byte> gather(const void* part, DType dtype) const override {
    const size_t element = dtype_size(dtype);
    if (group_->rank() != 0) {
      group_->exchange({{0, kGatherTag, part, bytes_of(group_->rank(), element)}}, {},
                       "the dense head's weight parts");
      return {};
    }
    std::vector<std::vector<std::byte>> parts(runs_.size());
    std::vector<Communicator::Incoming> receives;
    for (size_t r = 1; r < runs_.size(); ++r) {
      parts[r].resize(bytes_of(static_cast<int>(r), element));
      receives.push_back({static_cast<int>(r), kGatherTag, parts[r].data(), parts[r].size()});
    }
    group_->exchange({}, receives, "the dense head's weight parts");
    std::vector<std::byte> whole(static_cast<size_t>(rows_ * columns_) * element);
    copy_runs(0, static_cast<const std::byte*>(part), whole.data(), dtype, /*into_whole=*/true);
    for (size_t r = 1; r < runs_.size(); ++r)
      copy_runs(static_cast<int>(r), parts[r].data(), whole.data(), dtype, /*into_whole=*/true);
    return whole;
  }
  void scatter(const void* whole, void* part, DType dtype) const override {
    const size_t element = dtype_size(dtype);
    const bool first = group_->rank() == 0;
    std::byte holds{first && whole ? std::byte{1} : std::byte{0}};
    group_->broadcast(&holds, 1, 0);
    if (holds == std::byte{0}) return;
    if (!first) {
      group_->exchange({}, {{0, kScatterTag, part, bytes_of(group_->rank(), element)}},
                       "the dense head's weight parts");
      return;
    }
    std::vector<std::vector<std::byte>> parts(runs_.size());
    std::vector<Communicator::Outgoing> sends;
    for (size_t r = 1; r < runs_.size(); ++r) {
      parts[r].resize(bytes_of(static_cast<int>(r), element));
      copy_runs(static_cast<int>(r), static_cast<const std::byte*>(whole), parts[r].data(), dtype,
                /*into_whole=*/false);
      sends.push_back({static_cast<int>(r), kScatterTag, parts[r].data(), parts[r].size()});
    }
    group_->exchange(sends, {}, "the dense head's weight parts");
    take_part(whole, part, dtype);
  }
  void sum_over_group(double* values, size_t n) const override { group_->allreduce_sum(values, n); }
  Communicator* replicas() const override { return replicas_; }

 private:
  int64_t width(int rank) const { return count_of(runs_.at(static_cast<size_t>(rank))); }
  size_t bytes_of(int rank, size_t element) const {
    return static_cast<size_t>(rows_ * width(rank)) * element;
  }
  // Rank `rank`'s part [rows, width] to or from the whole [rows, columns], run by run.
  void copy_runs(int rank, const std::byte* from, std::byte* to, DType dtype,
                 bool into_whole) const {
    const size_t element = dtype_size(dtype);
    const int64_t w = width(rank);
    for (int64_t row = 0; row < rows_; ++row) {
      int64_t at = 0;
      for (const ColumnRun& run : runs_[static_cast<size_t>(rank)]) {
        const size_t whole = static_cast<size_t>(row * columns_ + run.begin) * element;
        const size_t part = static_cast<size_t>(row * w + at) * element;
        const size_t bytes = static_cast<size_t>(run.count) * element;
        if (into_whole)
          std::memcpy(to + whole, from + part, bytes);
        else
          std::memcpy(to + part, from + whole, bytes);
        at += run.count;
      }
    }
  }

  Communicator* group_;
  Communicator* replicas_;
  std::vector<std::vector<ColumnRun>> runs_;  // per group rank
  int64_t rows_, columns_, widest_ = 0;
};

// Runs of one block: every index of its spatial axes but the last, in order, each giving the
// block's extent along the last axis times the channels.
std::vector<ColumnRun> runs_of_block(const Shape& global, const std::vector<IndexRange>& block) {
  const int axes = static_cast<int>(block.size());
  const int64_t channels = global[1];
  std::vector<int64_t> at(static_cast<size_t>(axes));
  for (int a = 0; a < axes; ++a) at[static_cast<size_t>(a)] = block[static_cast<size_t>(a)].begin;
  std::vector<ColumnRun> runs;
  for (;;) {
    int64_t flat = 0;
    for (int a = 0; a < axes; ++a) flat = flat * global[a + 2] + at[static_cast<size_t>(a)];
    const ColumnRun run{flat * channels, block.back().size() * channels};
    if (!runs.empty() && runs.back().begin + runs.back().count == run.begin)
      runs.back().count += run.count;
    else
      runs.push_back(run);
    int a = axes - 2;  // the next index, the last axis held at its block's start
    for (; a >= 0; --a) {
      auto& i = at[static_cast<size_t>(a)];
      if (++i < block[static_cast<size_t>(a)].end) break;
      i = block[static_cast<size_t>(a)].begin;
    }
    if (a < 0) return runs;
  }
}

}  // namespace

std::vector<std::vector<ColumnRun>> block_feature_runs(const SpatialGrid& grid,
                                                       const Shape& global) {
  std::vector<std::vector<ColumnRun>> out;
  for (const std::vector<IndexRange>& block : blocks_of(grid, global))
    out.push_back(runs_of_block(global, block));
  return out;
}

std::shared_ptr<const ParamShard> make_feature_columns(Communicator& group, Communicator* replicas,
                                                       const SpatialGrid& grid, const Shape& global,
                                                       int64_t rows) {
  CREST_CHECK(global.rank() == static_cast<int>(grid.parts.size()) + 2,
              "feature columns of a value the grid does not split");
  const int64_t columns = global.numel() / global[0];
  return std::make_shared<FeatureColumns>(group, replicas, block_feature_runs(grid, global), rows,
                                          columns);
}

}  // namespace crest
