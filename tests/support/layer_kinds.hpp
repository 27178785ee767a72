// Any registered layer kind made from the smallest attributes it accepts: for the tests that walk
// every kind (layer traits, the ONNX export's coverage).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/graph/layer_registry.hpp"

namespace crest::test {

// The smallest attributes each kind accepts (most take none).
inline Attributes minimal_attributes(const std::string& kind) {
  Attributes a;
  if (kind == "conv" || kind == "conv_transpose") {
    a.set("out_channels", AttrValue(int64_t{4}));
    a.set("kernel", AttrValue(std::vector<int64_t>{3, 3}));
  }
  if (kind == "leaky_relu") a.set("negative_slope", AttrValue(0.3));
  if (kind == "dense") a.set("out_features", AttrValue(int64_t{4}));
  if (kind == "max_pool" || kind == "avg_pool")
    a.set("kernel", AttrValue(std::vector<int64_t>{2, 2}));
  return a;
}

inline std::unique_ptr<Layer> make_minimal_layer(const std::string& kind) {
  const LayerKind& k = find_layer_kind(kind);
  return k.make(k.canonical(minimal_attributes(kind)));
}

}  // namespace crest::test
