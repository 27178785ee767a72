#include "staged_parts.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/spatial/decomposition.hpp"

namespace crest {
namespace {

using Block = std::vector<int64_t>;  // begin and end per spatial axis: [b0, e0, b1, e1, ...]

// The block of every sample that rank `rank` holds: groups of consecutive ranks hold one sample
// each, numbered as the grid (make_hybrid_groups, SpatialGrid).
Block rank_block(const std::vector<int64_t>& parts, const std::vector<int64_t>& extents, int rank) {
  SpatialGrid grid;
  for (int64_t p : parts) grid.parts.push_back(static_cast<int>(p));
  const std::vector<int> coords = grid.coords(rank % grid.size());
  Block b;
  for (size_t a = 0; a < extents.size(); ++a) {
    const IndexRange r = block_range(extents[a], grid.parts[a], coords[a]);
    b.push_back(r.begin);
    b.push_back(r.end);
  }
  return b;
}

// The distinct blocks of this node's ranks, sorted.
std::vector<Block> node_blocks(Communicator& world, const Block& mine) {
  const std::unique_ptr<Communicator> node = world.split(world.node_id(), world.rank());
  std::vector<std::byte> bytes(mine.size() * sizeof(int64_t));
  std::memcpy(bytes.data(), mine.data(), bytes.size());
  std::set<Block> distinct;
  for (const std::vector<std::byte>& part : node->allgather_parts(bytes)) {
    Block b(mine.size());
    std::memcpy(b.data(), part.data(), part.size());
    distinct.insert(b);
  }
  return {distinct.begin(), distinct.end()};
}

std::string blocks_text(const std::vector<Block>& blocks, const std::vector<int64_t>& extents) {
  std::string text = blocks.size() == 1 ? "block " : "blocks ";
  for (size_t k = 0; k < blocks.size(); ++k) {
    text += k ? ", " : "";
    for (size_t a = 0; a < extents.size(); ++a)
      text += (a ? " x [" : "[") + std::to_string(blocks[k][2 * a]) + ", " +
              std::to_string(blocks[k][2 * a + 1]) + ")";
  }
  std::string shape;
  for (int64_t e : extents) shape += (shape.empty() ? "" : ", ") + std::to_string(e);
  return text + " of [" + shape + "] samples";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The blocks' rows of a C-order array shaped as the samples, `item` bytes per element, starting
// at byte `data_offset`.
std::vector<ByteRange> rows_of_blocks(const std::vector<int64_t>& sample, uint64_t item,
                                      uint64_t data_offset, const std::vector<Block>& blocks) {
  std::vector<ByteRange> ranges;
  for (const Block& b : blocks) {
    Block begin, end;
    for (size_t a = 0; 2 * a < b.size(); ++a) {
      begin.push_back(b[2 * a]);
      end.push_back(b[2 * a + 1]);
    }
    for (const ByteRange& r : c_order_block_ranges(sample, item, data_offset, begin, end))
      ranges.push_back(r);
  }
  return ranges;
}

// The bytes of the file at `path` (`bytes` long) that the blocks read, or none for the whole
// file:
// - an npy array shaped as the samples (C order): its header and the blocks' rows. DeepCAM's
//   fused files ([H, W, channels + 1]: the label beside every pixel, read whole by every rank)
//   and label maps ([H, W]) have other shapes;
// - a DeepCAM sample file (`data-*.h5`) whose climate/data lies in it as one C-order array
//   shaped as the samples: everything but the other blocks' rows of it (the file's metadata and
//   its label map stay whole).
std::vector<ByteRange> file_parts(const std::string& path, uint64_t bytes, const Shape& sample,
                                  const std::vector<Block>& blocks) {
  const std::vector<int64_t> dims = sample.to_vector();
  if (ends_with(path, ".npy")) {
    const NpyHeader h = read_npy_header(path);
    if (h.fortran_order || h.shape != dims) return {};
    std::vector<ByteRange> ranges =
        rows_of_blocks(dims, npy_dtype_size(h.dtype), h.data_offset, blocks);
    ranges.push_back({0, h.data_offset});
    return merge_ranges(ranges);
  }
  const std::string name = std::filesystem::path(path).filename().string();
  if (ends_with(name, ".h5") && name.rfind("data-", 0) == 0) {
    const DeepcamSampleShape s = probe_deepcam_sample(path);
    const int64_t offset = deepcam_data_offset(path);
    if (offset < 0 || std::vector<int64_t>{s.height, s.width, s.channels} != dims) return {};
    const uint64_t end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(sample.numel()) * 4;
    std::vector<ByteRange> ranges = rows_of_blocks(dims, 4, static_cast<uint64_t>(offset), blocks);
    ranges.push_back({0, static_cast<uint64_t>(offset)});
    ranges.push_back({end, bytes - std::min(bytes, end)});
    return merge_ranges(ranges);
  }
  return {};
}

}  // namespace

void stage_node_parts(const Config& config, Communicator& world, StageOptions& stage) {
  const std::vector<int64_t>& parts = config.dist.spatial;
  int groups_size = 1;
  for (int64_t p : parts) groups_size *= static_cast<int>(p);
  // Only a job that forms the groups (make_hybrid_groups refuses any other, after staging): a
  // process on its own (crest bench loader under mpirun) reads whole samples.
  if (groups_size <= 1 || world.size() % groups_size != 0) return;
  std::vector<int64_t> extents = config.data.sample_shape.to_vector();
  extents.pop_back();  // the channels
  const std::vector<Block> blocks = node_blocks(world, rank_block(parts, extents, world.rank()));
  const int partial = static_cast<int>(blocks.size()) < groups_size ? 1 : 0;
  if (world.allreduce_max(partial) == 0) return;
  stage.parts = [sample = config.data.sample_shape, blocks](const std::string& path,
                                                            uint64_t bytes) {
    return file_parts(path, bytes, sample, blocks);
  };
  stage.parts_text = blocks_text(blocks, extents);
}

}  // namespace crest
