// A source that presents part of another's samples (block_source.cpp: a spatial split's block;
// targets_source.cpp: the targets alone): the sample list, the paths and the classes are the
// whole source's, the spec and the reads the part's.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crest/data/sample_source.hpp"

namespace crest {

class SourceView : public SampleSource {
 public:
  explicit SourceView(std::shared_ptr<const SampleSource> whole)
      : whole_(std::move(whole)), spec_(whole_->spec()) {}
  std::string format() const override { return whole_->format(); }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return whole_->size(); }
  const std::string& path(int64_t i) const override { return whole_->path(i); }
  std::vector<std::string> class_names() const override { return whole_->class_names(); }

 protected:
  std::shared_ptr<const SampleSource> whole_;
  SampleSpec spec_;  // the whole source's until the view changes it
};

}  // namespace crest
