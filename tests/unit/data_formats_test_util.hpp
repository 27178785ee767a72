// Helpers shared by the data-format tests: a scratch directory, whole-file I/O and a check that
// an operation fails with a crest::Error (input) whose message contains given pieces of text.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "crest/core/error.hpp"

namespace crest::test {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "crest-formats-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  // Names of the entries, sorted: writers must leave no temporary file behind.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path dir_;
};

inline std::vector<std::byte> read_file_bytes(const std::string& path) {
  std::vector<std::byte> out(std::filesystem::file_size(path));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return out;
}

inline void write_file_bytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
  return out;
}

inline std::vector<std::byte> from_hex(const std::string& hex) {
  std::vector<std::byte> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

inline std::string fixture_path(const std::string& name) {
  return std::string(CREST_SOURCE_DIR) + "/tests/fixtures/formats/" + name;
}

// Runs `fn`, which must throw crest::Error of kind input with every needle in its message.
template <typename Fn>
void expect_input_error(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a crest::Error containing '" << *needles.begin() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input) << e.what();
    const std::string msg = e.what();
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << msg << "\n  lacks: " << n;
  }
}

}  // namespace crest::test
