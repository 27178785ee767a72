// SampleBlock, the default block read of SampleSource, and block_of_samples
// (sample_source.hpp).
#include <utility>

#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/data/sample_source.hpp"
#include "source_view.hpp"

namespace crest {

Shape SampleBlock::x_shape(const Shape& whole) const {
  std::vector<int64_t> dims = whole.to_vector();
  for (size_t a = 0; a < begin.size(); ++a) dims[a] = end[a] - begin[a];
  return Shape(dims);
}

void SampleSource::decode_block(int64_t i, const SampleBlock& block,
                                std::span<const std::byte> payload, float* x, void* y,
                                const SampleDraw& draw) const {
  const Shape whole = spec().x_shape;
  // Per thread: the loader decodes on several.
  thread_local std::vector<float> sample;
  sample.resize(static_cast<size_t>(whole.numel()));
  decode_drawn(i, payload, sample.data(), y, draw);
  const std::vector<int64_t> dims = whole.to_vector();
  std::vector<int64_t> start(dims.size(), 0);
  for (size_t a = 0; a < block.begin.size(); ++a) start[a] = block.begin[a];
  const std::vector<int64_t> count = block.x_shape(whole).to_vector();
  box_transfer(sample.data(), BoxAt{dims, start}, x,
               BoxAt{count, std::vector<int64_t>(count.size(), 0)}, count, DType::f32, BoxOp::copy);
}

namespace {

class BlockSource final : public SourceView {
 public:
  BlockSource(std::shared_ptr<const SampleSource> whole, SampleBlock block)
      : SourceView(std::move(whole)), block_(std::move(block)) {
    spec_.x_shape = block_.x_shape(whole_->spec().x_shape);
  }
  void read(int64_t i, std::vector<std::byte>& payload) const override {
    whole_->read_block(i, block_, payload);
  }
  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    whole_->decode_block(i, block_, payload, x, y, SampleDraw{});
  }
  // The loader's draws reach the whole sample's transform: every rank of a spatial group cuts
  // its block from the same crop and flip.
  void decode_drawn(int64_t i, std::span<const std::byte> payload, float* x, void* y,
                    const SampleDraw& draw) const override {
    whole_->decode_block(i, block_, payload, x, y, draw);
  }
  bool reads_blocks() const override { return whole_->reads_blocks(); }

 private:
  SampleBlock block_;
};

}  // namespace

std::shared_ptr<SampleSource> block_of_samples(std::shared_ptr<const SampleSource> whole,
                                               SampleBlock block) {
  const Shape x = whole->spec().x_shape;
  const size_t axes = block.begin.size();
  if (block.end.size() != axes || axes + 1 != static_cast<size_t>(x.rank()))
    throw_usage("dist.spatial: a block of " + std::to_string(axes) +
                " spatial axes does not fit samples of shape " + x.str());
  for (size_t a = 0; a < axes; ++a)
    if (block.begin[a] < 0 || block.end[a] <= block.begin[a] ||
        block.end[a] > x[static_cast<int>(a)])
      throw_usage("dist.spatial: rows [" + std::to_string(block.begin[a]) + ", " +
                  std::to_string(block.end[a]) + ") of axis " + std::to_string(a) +
                  " are not a block of samples of shape " + x.str());
  return std::make_shared<BlockSource>(std::move(whole), std::move(block));
}

}  // namespace crest
