#include "crest/core/shape.hpp"

#include <sstream>

#include "crest/core/error.hpp"

namespace crest {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::vector<int64_t>(dims)) {}

Shape::Shape(const std::vector<int64_t>& dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw_input("shape of rank " + std::to_string(dims.size()) + " exceeds the maximum rank 8");
  rank_ = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) throw_input("negative dimension in shape");
    dims_[i] = dims[i];
  }
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::vector<int64_t> Shape::to_vector() const {
  return std::vector<int64_t>(dims_.begin(), dims_.begin() + rank_);
}

std::string Shape::str() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < rank_; ++i) os << (i ? ", " : "") << dims_[static_cast<size_t>(i)];
  os << ']';
  return os.str();
}

Shape Shape::with_batch(int64_t n) const {
  std::vector<int64_t> d{n};
  for (int i = 0; i < rank_; ++i) d.push_back(dims_[static_cast<size_t>(i)]);
  return Shape(d);
}

Shape Shape::without_batch() const {
  CREST_CHECK(rank_ >= 1, "without_batch on a scalar shape");
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.begin() + rank_));
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

}  // namespace crest
