// Private to the reference backend: the scalar activation functions, shared by the eltwise kernel
// and the conv post-op so a fused activation is by construction the same as a separate one.
#pragma once
#include <cmath>

#include "crest/backends/kernels.hpp"

namespace crest::reference {

// Throws crest::Error (input) for parameters whose backward cannot be computed from the output.
void validate_eltwise(const EltwiseDesc& d, const char* context);

template <typename T>
T eltwise_forward(const EltwiseDesc& d, T x) {
  const T alpha = static_cast<T>(d.alpha);
  switch (d.kind) {
    case EltwiseKind::none:
      return x;
    case EltwiseKind::relu:
    case EltwiseKind::leaky_relu:
      return x > T(0) ? x : alpha * x;
    case EltwiseKind::tanh:
      return std::tanh(x);
    case EltwiseKind::sigmoid:
      // Two branches so exp never overflows: exp of a non-positive number only.
      if (x >= T(0))
        return T(1) / (T(1) + std::exp(-x));
      else {
        const T e = std::exp(x);
        return e / (T(1) + e);
      }
    case EltwiseKind::linear:
      return alpha * x + static_cast<T>(d.beta);
  }
  return x;
}

// d y / d x expressed through y = f(x); legal because every kind is monotone (validated).
template <typename T>
T eltwise_derivative_from_dst(const EltwiseDesc& d, T y) {
  switch (d.kind) {
    case EltwiseKind::none:
      return T(1);
    case EltwiseKind::relu:
    case EltwiseKind::leaky_relu:
      return y > T(0) ? T(1) : static_cast<T>(d.alpha);
    case EltwiseKind::tanh:
      return T(1) - y * y;
    case EltwiseKind::sigmoid:
      return y * (T(1) - y);
    case EltwiseKind::linear:
      return static_cast<T>(d.alpha);
  }
  return T(1);
}

}  // namespace crest::reference
