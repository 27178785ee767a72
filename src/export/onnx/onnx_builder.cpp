#include "onnx_builder.hpp"

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"

namespace crest::onnx_export {

HostParams::HostParams(const ParamStore& params) {
  const HostStaging host(params.memory(), static_cast<const void*>(params.values()),
                         params.bytes());
  for (const ParamSlot& slot : params.slots()) {
    const char* src = host.as<char>() + slot.offset;
    std::vector<float> v(slot.count);
    for (size_t i = 0; i < slot.count; ++i)
      v[i] = params.dtype() == DType::f32
                 ? reinterpret_cast<const float*>(src)[i]
                 : static_cast<float>(reinterpret_cast<const double*>(src)[i]);
    values_[slot.name] = std::move(v);
    shapes_[slot.name] = slot.shape;
  }
}

const std::vector<float>& HostParams::values(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) throw_input("the model has no parameter '" + name + "' to export");
  return it->second;
}

const Shape& HostParams::shape(const std::string& name) const {
  values(name);  // the error for a missing one
  return shapes_.at(name);
}

std::string OnnxGraphBuilder::fresh(const std::string& base) {
  std::string name = base;
  for (int n = 1; used_.count(name); ++n) name = base + "_" + std::to_string(n);
  used_.insert(name);
  return name;
}

onnx::NodeProto& OnnxGraphBuilder::node(const std::string& op_type, const std::string& name,
                                        const std::vector<std::string>& inputs,
                                        const std::vector<std::string>& outputs) {
  onnx::NodeProto& n = *graph_.add_node();
  n.set_op_type(op_type);
  n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  for (const auto& o : outputs) n.add_output(o);
  return n;
}

std::string OnnxGraphBuilder::param(const std::string& node, const std::string& param,
                                    const std::vector<int64_t>& dims) {
  const std::string key = node + "." + param;
  const std::vector<float>& v = params_.values(key);
  return floats(key, dims.empty() ? params_.shape(key).to_vector() : dims, v);
}

std::string OnnxGraphBuilder::floats(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<float>& values) {
  onnx::TensorProto& t = *graph_.add_initializer();
  t.set_name(fresh(name));
  t.set_data_type(onnx::TensorProto::FLOAT);
  int64_t count = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    count *= d;
  }
  CREST_CHECK(count == static_cast<int64_t>(values.size()), "initializer " + name + " size");
  // raw_data: little-endian float32, as the format stores it; far smaller than float_data.
  t.set_raw_data(values.data(), values.size() * sizeof(float));
  return t.name();
}

std::string OnnxGraphBuilder::int64s(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& values) {
  onnx::TensorProto& t = *graph_.add_initializer();
  t.set_name(fresh(name));
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t v : values) t.add_int64_data(v);
  return t.name();
}

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
}

void set_attr(onnx::NodeProto& n, const std::string& name, float v) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(v);
}

void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}

}  // namespace crest::onnx_export
