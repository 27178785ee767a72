#include "crest/export/inference_check.hpp"

#include <algorithm>
#include <cstring>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/data/formats/npy.hpp"

namespace crest {
namespace {

// x's per-sample dims as a caller writes them: channels last when its layout says so.
std::vector<int64_t> written_dims(const GraphInput& x) {
  std::vector<int64_t> d = x.per_sample.to_vector();
  if (x.layout == Layout::channels_last && d.size() > 1)
    std::rotate(d.begin(), d.begin() + 1, d.end());
  return d;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// A channels-last tensor [N, spatial..., C] of logical shape `s` ([N, C, spatial...]) in plain
// order.
std::vector<float> to_plain(const float* src, const Shape& s) {
  const int64_t n = s[0], c = s[1], spatial = s.numel() / std::max<int64_t>(n * c, 1);
  std::vector<float> out(static_cast<size_t>(s.numel()));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < spatial; ++p)
      for (int64_t k = 0; k < c; ++k)
        out[static_cast<size_t>((b * c + k) * spatial + p)] = src[(b * spatial + p) * c + k];
  return out;
}

}  // namespace

CheckInput read_check_input(const std::string& path, const GraphInput& x) {
  const NpyArray a = read_npy(path);
  const std::vector<int64_t> want = written_dims(x);
  if (a.dtype != NpyDType::f32)
    throw_input(path + ": --check-with needs float32 values, the file holds " +
                npy_dtype_name(a.dtype));
  if (a.shape.size() != want.size() + 1 || a.shape[0] < 1 ||
      !std::equal(want.begin(), want.end(), a.shape.begin() + 1))
    throw_input(path + ": shape " + dims_text(a.shape) + ", the model's input '" + x.name +
                "' needs [N, " + dims_text(want).substr(1));
  CheckInput in{x.name, a.shape[0], std::vector<float>(static_cast<size_t>(a.numel()))};
  std::memcpy(in.values.data(), a.data.data(), in.values.size() * sizeof(float));
  return in;
}

void run_inference_check(Executor& ex, const Graph& graph, const CheckInput& in,
                         const std::string& out) {
  const TensorView x = ex.input(in.name);
  CREST_CHECK(x.dtype() == DType::f32 && x.bytes() == in.values.size() * sizeof(float),
              "the check executor's input is not the file's size");
  {
    HostStaging host(ex.backend().memory(), x.data(), x.bytes());
    std::memcpy(host.data(), in.values.data(), x.bytes());
    host.commit();
  }
  ex.forward(false);
  const TensorView y = ex.output(graph.outputs().at(0));
  CREST_CHECK(y.dtype() == DType::f32, "the prediction is not float32");
  const HostStaging host(ex.backend().memory(), static_cast<const void*>(y.data()), y.bytes());
  const float* v = static_cast<const float*>(host.data());
  const std::vector<float> plain = y.desc().layout == Layout::channels_last
                                       ? to_plain(v, y.shape())
                                       : std::vector<float>(v, v + y.numel());
  write_npy(out, DType::f32, y.shape().to_vector(), plain.data());
}

}  // namespace crest
