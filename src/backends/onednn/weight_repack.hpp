// crest's own copies between its plain float32 weights and the blocked layouts oneDNN's kernels
// read (ABcd8b16a2b, BAcd8a16b2a, ABcd16b16a, AcdB64a2b, ...), in both directions: the weights
// going in (to float32 or bf16) and the weight gradient coming out (float32).
//
// Why: every training step converts every weight tensor three times (forward, backward data,
// the gradient back), and oneDNN 3.2's reorders ran these at 1.4-2.4 G elements/s inside
// DeepCAM's bf16 step on a 2-core Zen 5, about 80 ms of a 390 ms step at 192x288. Here a tile of
// one output-channel block by one input-channel block, over all kernel taps, is gathered with a
// precomputed offset table into each contiguous run of the destination, so the reads stay in a
// few cache lines and the writes stream. Tiles of many rows with several taps copy their rows
// side by side first (a panel): in place, rows a multiple of 4 KB apart share one L1 set.
//
// Any oneDNN blocked layout is separable: an element's offset is the sum of one term per logical
// dimension (outer index times stride, plus its digits' places inside the inner block), which is
// what makes one table per tile enough.
#pragma once
#include <array>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <vector>

namespace crest::onednn {

class WeightRepack {
 public:
  // The repack from `from` to `to`, or nullopt where crest's loops do not cover the pair (then
  // oneDNN's reorder does it). Covered, for 2- to 5-dimensional weights [out, in, taps...]
  // ([g, out, in, taps...] grouped) whose inner blocks, if any, are on the first two dimensions:
  //   plain float32 with any strides and offset (a window too) -> blocked float32 or bf16;
  //   blocked float32 -> dense plain float32 (crest's own order, no offset).
  static std::optional<WeightRepack> plan(const dnnl::memory::desc& from,
                                          const dnnl::memory::desc& to);

  // Converts all of `from` into `to`, zeroing the blocked side's padding.
  void run(const void* from, void* to) const;

  // Orders inside a 16x16 block that the loops transpose in registers instead of gathering:
  // [o][i], [i][o], bf16 pairs of input channels [i/2][o][i%2] (oneDNN's ABcd8b16a2b, the
  // forward's) and of output channels [o/2][i][o%2] (BAcd8a16b2a, backward data's).
  enum class TileOrder { none, out_in, in_out, in_pairs, out_pairs };

  // A tile's source rows copied side by side (to_blocked): the offsets of each block's elements
  // in it, in destination order, and the span of one row (0: no panel).
  struct Panel {
    int64_t row = 0;
    const int32_t* gather = nullptr;
  };

  // How a layout places element (o, i, tap) (public for the loops in the .cpp file).
  struct Placement {
    std::array<int64_t, 2> block{1, 1};   // channels per inner block: out, in
    std::array<int64_t, 2> stride{0, 0};  // between consecutive blocks: out, in
    std::vector<int64_t> inner;           // [oo * block[1] + ii]: place inside the block
    std::vector<int64_t> tap;             // [t]: offset of tap t (row-major over the taps)
    int64_t offset = 0;                   // of element 0 (a window's start)
  };

 private:
  enum class Direction { to_blocked, to_plain };
  void plan_panel(const Placement& plain, const Placement& blocked);
  Direction direction_ = Direction::to_blocked;
  bool bf16_ = false;  // the blocked side's data type (to_blocked only)
  int64_t out_ = 0, in_ = 0;
  Placement plain_, blocked_;
  TileOrder order_ = TileOrder::none;  // the blocked side's, for 1x1 kernels
  // For each full tile, the plain side's offset (relative to the tile's first element) of each
  // element in the order the destination's runs are written.
  std::vector<int32_t> gather_;        // 32-bit: 16 lanes per gather on AVX-512
  int64_t panel_row_ = 0;              // to_blocked through a panel: each row's span, else 0
  std::vector<int32_t> panel_gather_;  // the gather's offsets inside the panel
};

}  // namespace crest::onednn
