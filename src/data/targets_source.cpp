// The default targets-only decode of SampleSource, and targets_of_samples (sample_source.hpp): a
// pipeline's last stage reads the targets it feeds, not the samples its first stage feeds.
#include <utility>
#include <vector>

#include "crest/data/sample_source.hpp"
#include "source_view.hpp"

namespace crest {

void SampleSource::decode_targets(int64_t i, std::span<const std::byte> payload, void* y,
                                  const SampleDraw& draw) const {
  // Per thread: the loader decodes on several.
  thread_local std::vector<float> sample;
  sample.resize(static_cast<size_t>(spec().x_shape.numel()));
  decode_drawn(i, payload, sample.data(), y, draw);
}

namespace {

class TargetsSource final : public SourceView {
 public:
  explicit TargetsSource(std::shared_ptr<const SampleSource> whole) : SourceView(std::move(whole)) {
    spec_.x_shape = Shape{0};
  }
  void read(int64_t i, std::vector<std::byte>& payload) const override {
    whole_->read_targets(i, payload);
  }
  void decode(int64_t i, std::span<const std::byte> payload, float* /*x*/, void* y) const override {
    whole_->decode_targets(i, payload, y, SampleDraw{});
  }
  void decode_drawn(int64_t i, std::span<const std::byte> payload, float* /*x*/, void* y,
                    const SampleDraw& draw) const override {
    whole_->decode_targets(i, payload, y, draw);
  }
  bool reads_targets_alone() const override { return whole_->reads_targets_alone(); }
};

}  // namespace

std::shared_ptr<SampleSource> targets_of_samples(std::shared_ptr<const SampleSource> whole) {
  return std::make_shared<TargetsSource>(std::move(whole));
}

}  // namespace crest
