// A one-dimensional parameter slot for optimizer tests that build a ParamStore by hand.
#pragma once
#include <string>

#include "crest/graph/param_store.hpp"

namespace crest::test {

inline ParamSlot flat_slot(const std::string& name, int64_t n, bool trainable = true) {
  ParamSlot s;
  s.name = name;
  s.shape = Shape{n};
  s.spec.name = name;
  s.spec.shape = s.shape;
  s.spec.trainable = trainable;
  return s;
}

}  // namespace crest::test
