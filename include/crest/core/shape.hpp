// Shape: up to 8 dimensions, stored inline so shapes never allocate.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace crest {

class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  std::vector<int64_t> to_vector() const;
  std::string str() const;  // "[2, 4, 32, 32, 32]"

  // A new shape with `n` prepended (batch) or with the first dimension dropped.
  Shape with_batch(int64_t n) const;
  Shape without_batch() const;

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Product of dimension sizes given as a list (file formats' shapes may exceed kMaxRank); 1 for
// a scalar. Callers check overflow where the dims come from a file.
inline int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace crest
