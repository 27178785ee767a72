#include <algorithm>
#include <filesystem>
#include <system_error>

#include "crest/core/error.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {

std::vector<std::string> list_sample_files(const std::string& dir,
                                           const std::vector<std::string>& suffixes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw_input(dir + ": not a directory (expected sample files in it)");
  std::vector<std::string> files;
  fs::directory_iterator it(dir, ec);
  if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
    const std::string name = it->path().filename().string();
    const bool wanted = std::any_of(suffixes.begin(), suffixes.end(), [&](const std::string& s) {
      return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    });
    if (wanted && it->is_regular_file(ec)) files.push_back(it->path().string());
  }
  if (files.empty()) {
    std::string list;
    for (const auto& s : suffixes) list += (list.empty() ? "*" : ", *") + s;
    throw_input(dir + ": no sample files (" + list + ") in the directory");
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace crest
