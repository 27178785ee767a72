// Building an ONNX graph from crest's: names of values, nodes with their attributes, and the
// parameters as float32 initializers. Private to src/export/onnx (the only code that sees
// ONNX's protobuf classes).
#pragma once
#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "crest/core/shape.hpp"
#include "crest/graph/graph.hpp"
#include "crest/graph/param_store.hpp"

namespace crest::onnx_export {

// The parameters' values on the host as float32, by crest name ("conv1.weight").
class HostParams {
 public:
  explicit HostParams(const ParamStore& params);
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  // Throws crest::Error (input) naming the parameter when the store has none of that name.
  const std::vector<float>& values(const std::string& name) const;
  const Shape& shape(const std::string& name) const;

 private:
  std::map<std::string, std::vector<float>> values_;
  std::map<std::string, Shape> shapes_;
};

class OnnxGraphBuilder {
 public:
  OnnxGraphBuilder(onnx::GraphProto& graph, const HostParams& params)
      : graph_(graph), params_(params) {}

  // The ONNX name a crest value currently has.
  const std::string& value(ValueId v) const { return values_.at(v); }
  void set_value(ValueId v, const std::string& name) { values_[v] = name; }
  // A name no other ONNX value has: `base`, or `base` with a number.
  std::string fresh(const std::string& base);

  // Appends a node of `op_type` (the default domain); attributes are added to the result.
  onnx::NodeProto& node(const std::string& op_type, const std::string& name,
                        const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs);

  // Parameter `<node>.<param>` as an initializer of its own shape (or `dims`, same count).
  std::string param(const std::string& node, const std::string& param,
                    const std::vector<int64_t>& dims = {});
  std::string floats(const std::string& name, const std::vector<int64_t>& dims,
                     const std::vector<float>& values);
  std::string int64s(const std::string& name, const std::vector<int64_t>& dims,
                     const std::vector<int64_t>& values);

 private:
  onnx::GraphProto& graph_;
  const HostParams& params_;
  std::map<ValueId, std::string> values_;
  std::set<std::string> used_;  // every ONNX name given out
};

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v);
void set_attr(onnx::NodeProto& n, const std::string& name, float v);
void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);

}  // namespace crest::onnx_export
